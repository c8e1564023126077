#pragma once
// The codec of S2-Pro ("ModifiedDAC", fact sheet section 7): its sizes and every tensor as the
// release's codec.pth names them (section 7.5; a state dict, read from codec.pth itself or from
// a codec.safetensors with the same keys).
//
// codec.pth carries no config: the sizes are the release's (modded_dac_vq.yaml), and for other
// codecs (the generated tiny / small ones) they are read off the tensors' shapes
// (infer_codec_sizes): widths from the convolutions, strides from the transposed kernels
// (kernel = 2 * stride), layer counts from the keys. Fixed by the architecture: transformer head
// width 64, attention window 128 (pre / post module) and 512 (encoder), RoPE theta 1e4.
//
// Conv1d weights are [out, in, k], ConvTranspose1d [in, out, k]; weight-normed convolutions
// store g and V: `conv.parametrizations.weight.original0` / `original1` (encoder, decoder) or
// `weight_g` / `weight_v` (quantizer in_proj / out_proj).
//
// Thread safety: plain values and pure functions.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/dummy.h"
#include "checkpoint/tensor_check.h"
#include "core/error.h"

namespace omnirt::models::s2_pro {

inline constexpr std::string_view kCodecFile = "codec.safetensors";
inline constexpr std::string_view kCodecPickleFile = "codec.pth";
inline constexpr std::int64_t kCodecHeadDim = 64;
inline constexpr std::int64_t kCodecWindow = 128;
inline constexpr std::int64_t kCodecEncoderWindow = 512;
inline constexpr double kCodecRopeTheta = 10000.0;
inline constexpr double kCodecNormEps = 1e-5;
inline constexpr std::int64_t kCodecSampleRate = 44100;

struct CodecSizes {
    std::int64_t latent = 1024;           // quantizer / transformer width
    std::int64_t transformer_layers = 8;  // pre_module and post_module each
    std::int64_t transformer_intermediate = 3072;
    std::int64_t convnext_intermediate = 4096;  // pwconv1 rows
    std::int64_t resample_stages = 2;           // quantizer downsample / upsample (x2 each)
    std::int64_t codebook_dim = 8;
    std::int64_t semantic_codebook_size = 4096;
    std::int64_t codebook_size = 1024;  // each residual codebook
    std::int64_t residual_codebooks = 9;
    std::int64_t decoder_dim = 1536;                      // decoder.model.0's output channels
    std::vector<std::int64_t> decoder_rates{8, 8, 4, 2};  // channels halve at every stage
    std::int64_t encoder_dim = 64;                        // encoder.block.0's output channels
    std::vector<std::int64_t> encoder_rates{2, 4, 8, 8};  // channels double at every stage
    std::int64_t encoder_transformer_layers = 4;          // inside the last encoder block

    // Samples per codec frame: the decoder's rates times 2 per resample stage (2048).
    [[nodiscard]] std::int64_t hop() const;
    [[nodiscard]] std::int64_t num_codebooks() const { return 1 + residual_codebooks; }
};

// Generated codecs: "release" (modded_dac_vq.yaml), "tiny" (latent 64, decoder 64 -> 4 channels,
// 2 transformer layers: a few hundred KiB), "small" (latent 256). not_found for other names.
[[nodiscard]] Result<CodecSizes> codec_preset(std::string_view name);

// In module order, the encoder side included.
[[nodiscard]] std::vector<checkpoint::ExpectedTensor> codec_expected_tensors(
    const CodecSizes& sizes);
// As dummy specs of `dtype`: norm weights, LayerScale gammas, weight-norm g and Snake alphas
// around 1, the rest around 0.
[[nodiscard]] std::vector<checkpoint::TensorSpec> codec_tensor_specs(const CodecSizes& sizes,
                                                                     DType dtype);

// The sizes of a codec from its tensors' names and shapes (`shape_of` returns an empty shape
// for an absent name). invalid_argument naming the tensor when one the inference needs is
// missing or of an impossible shape.
using ShapeOf = std::function<Shape(const std::string& name)>;
[[nodiscard]] Result<CodecSizes> infer_codec_sizes(const ShapeOf& shape_of);

}  // namespace omnirt::models::s2_pro

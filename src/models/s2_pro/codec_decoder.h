#pragma once
// The decode side of S2-Pro's codec (fact sheet section 7.3): codes [B, 10, T] -> waveform
// [B, hop * T] float32 at 44.1 kHz (hop 2048 for the release), incrementally.
//
//   VQ decode     z = sum_k out_proj_k(codebook_k[clamp(c_k)])              [B, latent, T]
//   post_module   causal transformer, window 128 frames, RoPE (interleaved pairs, theta 1e4,
//                 bf16 table) at absolute frame positions, LayerScale, final RMSNorm
//   upsample x2   causal transposed conv (k 2, s 2) + ConvNeXt (causal depthwise k7, LayerNorm,
//                 GELU MLP, gamma), each
//   decoder       causal conv k7 -> per stage: Snake, causal transposed conv (k 2s, s), three
//                 residual units (dilation 1, 3, 9) -> Snake -> causal conv k7 -> tanh
//
// Every operator is causal, so the decoder streams exactly: a DecodeState carries what the next
// frames need of the past (the last inputs of every convolution, the last input frame of every
// transposed convolution, each transformer layer's keys and values of the last 127 frames and
// the frame position). decode_chunk() over any split of the frames gives the samples of
// decode() over all of them (the same arithmetic on the same values, up to float reassociation
// in the kernels). Weight norms are folded once at load, transposed convolutions rewritten as
// the kernel-2 convolutions they equal (codec_layers.h transposed_as_conv).
//
// Precision (CodecDecoderOptions::dtype): float32 (SGLang keeps the codec in fp32, section 7.6)
// or bfloat16 (the fish-speech CLI's default): the upsampler and decoder weights and
// activations in bfloat16 (oneDNN's convolutions use the CPU's AMX / AVX512-BF16 units; Snake
// computes in float32 and rounds once); the VQ decode and the post_module transformer (3% of
// the work) stay float32; the waveform is float32 either way.
//
// Thread safety: a CodecDecoder is immutable after create() (share it); each stream owns its
// DecodeState and calls decode_chunk() from one thread at a time.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/s2_pro/codec_weights.h"

namespace omnirt::models::s2_pro {

struct CodecTransformerLayer {
    at::Tensor attention_norm, wqkv, wo, attention_scale;  // wqkv: q / k rows de-interleaved
    at::Tensor ffn_norm, gate_up, down, ffn_scale;
};
struct CodecTransformer {
    std::vector<CodecTransformerLayer> layers;
    at::Tensor norm;
    std::int64_t window = kCodecWindow;
};
struct CodecConv {  // weight [out, in / groups, k] (folded), bias [out]
    at::Tensor weight, bias;
    std::int64_t dilation = 1;
    std::int64_t groups = 1;
};
struct CodecConvNeXt {
    CodecConv dwconv;
    at::Tensor norm_weight, norm_bias, pw1_weight, pw1_bias, pw2_weight, pw2_bias, gamma;
};
struct CodecResidualUnit {
    at::Tensor alpha1, alpha2;
    CodecConv conv1, conv2;  // k7 dilated, k1
};
struct CodecDecoderStage {
    at::Tensor alpha;
    CodecConv transposed;  // transposed_as_conv: weight [out * stride, in, 2]
    std::int64_t stride = 0;
    std::vector<CodecResidualUnit> units;
};
struct CodecDecoderWeights {
    std::vector<at::Tensor> codebooks;  // [entries, codebook_dim]
    std::vector<CodecConv> out_proj;    // [latent, codebook_dim, 1]
    CodecTransformer post;
    std::vector<CodecConv> upsample;  // transposed_as_conv of [latent, latent, 2], stride 2:
                                      // weight [latent * 2, latent, 1]
    std::vector<CodecConvNeXt> upsample_convnext;
    CodecConv first;
    std::vector<CodecDecoderStage> stages;
    at::Tensor final_alpha;
    CodecConv last;
};

struct CodecDecoderOptions {
    at::Device device = at::kCPU;
    at::ScalarType dtype = at::kFloat;  // float32 or bfloat16 (see the top of this file)
};

class CodecDecoder {
  public:
    // What a stream carries from one decode_chunk() to the next (opaque to callers).
    struct DecodeState {
        std::int64_t batch = 0;
        std::int64_t frames = 0;        // decoded so far (the next frame's position)
        std::vector<at::Tensor> carry;  // per causal convolution's window, in call order
        std::vector<at::Tensor> keys;   // per post_module layer [B, heads, <= window - 1, 64]
        std::vector<at::Tensor> values;
    };

    // Loads the decode side through `lookup` (codec.pth key names) with `sizes`
    // (infer_codec_sizes). Errors name the tensor (not_found, invalid_argument for a shape);
    // invalid_argument for a dtype other than float32 or bfloat16.
    [[nodiscard]] static Result<std::unique_ptr<CodecDecoder>> create(
        const CodecSizes& sizes, const qwen3::WeightLookup& lookup,
        CodecDecoderOptions options = {});
    // The codec of a checkpoint directory: codec.safetensors, else codec.pth (a torch.save
    // state dict; codec_layers.h open_codec_file). not_found when neither is there.
    [[nodiscard]] static Result<std::unique_ptr<CodecDecoder>> open(
        const std::filesystem::path& directory, CodecDecoderOptions options = {});

    [[nodiscard]] const CodecSizes& sizes() const { return sizes_; }
    [[nodiscard]] std::int64_t hop() const { return sizes_.hop(); }
    [[nodiscard]] at::ScalarType dtype() const { return options_.dtype; }

    [[nodiscard]] DecodeState new_state(std::int64_t batch) const;
    // codes [B, num_codebooks, T] (any integer dtype, any device; values clamped to each
    // codebook) -> [B, hop * T] float32. invalid_argument for another shape or batch.
    [[nodiscard]] Result<at::Tensor> decode_chunk(DecodeState& state,
                                                  const at::Tensor& codes) const;
    // decode_chunk() of all frames with a new state.
    [[nodiscard]] Result<at::Tensor> decode(const at::Tensor& codes) const;

  private:
    CodecDecoder(CodecSizes sizes, CodecDecoderWeights weights, CodecDecoderOptions options);
    [[nodiscard]] at::Tensor run(DecodeState& state, const at::Tensor& codes) const;

    CodecSizes sizes_;
    CodecDecoderWeights weights_;
    CodecDecoderOptions options_;
};

}  // namespace omnirt::models::s2_pro

#pragma once
// The encode side of S2-Pro's codec (fact sheet section 7.4): reference audio [B, N] float32 at
// 44.1 kHz, mono -> codes [B, num_codebooks, ceil(N / hop)] int64 (row 0 semantic), for voice
// cloning from a clip.
//
//   right-pad with zeros to a multiple of hop
//   encoder        causal conv k7 -> per stage: three residual units (dilation 1, 3, 9) at half
//                  width, Snake, causal strided conv (k 2s, s) doubling the width; the last stage
//                  then runs its transformer (window 512) -> Snake -> causal conv k3
//   downsample x2  causal strided conv (k 2, s 2) + ConvNeXt, each
//   pre_module     causal transformer, window 128
//   quantize       semantic VQ on z, then 9 residual VQ stages on z - z_sem: e = in_proj(r),
//                  nearest codebook row by cosine, r -= out_proj(row)
// Resampling and channel mixing to mono are the caller's (media layer). Not streaming: a
// reference clip is encoded whole. float32.
//
// Thread safety: immutable after create(); encode() may run on several threads at once.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <filesystem>
#include <memory>

#include "core/error.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/s2_pro/codec_decoder.h"

namespace omnirt::models::s2_pro {

struct CodecEncoderStage {
    std::vector<CodecResidualUnit> units;
    at::Tensor alpha;
    CodecConv conv;  // [2 dim, dim, 2 stride], strided
    std::int64_t stride = 0;
};

struct CodecEncoderWeights {
    CodecConv first;
    std::vector<CodecEncoderStage> stages;
    CodecTransformer transformer;  // after the last stage (window 512)
    at::Tensor final_alpha;
    CodecConv last;
    std::vector<CodecConv> downsample;  // [latent, latent, 2], strided
    std::vector<CodecConvNeXt> downsample_convnext;
    CodecTransformer pre;
    std::vector<at::Tensor> codebooks;  // [entries, codebook_dim]
    std::vector<CodecConv> in_proj;     // [codebook_dim, latent, 1]
    std::vector<CodecConv> out_proj;    // [latent, codebook_dim, 1]
};

class CodecEncoder {
  public:
    // Errors name the tensor; invalid_argument when `sizes` has no encoder.
    [[nodiscard]] static Result<std::unique_ptr<CodecEncoder>> create(
        const CodecSizes& sizes, const qwen3::WeightLookup& lookup, at::Device device = at::kCPU);
    // The codec of a checkpoint directory (as CodecDecoder::open).
    [[nodiscard]] static Result<std::unique_ptr<CodecEncoder>> open(
        const std::filesystem::path& directory, at::Device device = at::kCPU);

    [[nodiscard]] const CodecSizes& sizes() const { return sizes_; }
    // audio [B, N] (or [N]) float -> codes [B, num_codebooks, ceil(N / hop)] int64 on the CPU.
    // invalid_argument for another rank, no samples, or non-finite samples.
    [[nodiscard]] Result<at::Tensor> encode(const at::Tensor& audio) const;

  private:
    CodecEncoder(CodecSizes sizes, CodecEncoderWeights weights, at::Device device);

    CodecSizes sizes_;
    CodecEncoderWeights weights_;
    at::Device device_;
};

}  // namespace omnirt::models::s2_pro

#pragma once
// The building blocks of S2-Pro's codec (fact sheet section 7.2) as functions over at::Tensors,
// channels-first [B, C, T], float32 or bfloat16 (the weights' dtype; Snake alphas and the
// transformer stay float32), each in a streaming form: `carry` holds what the block needs of
// earlier calls (undefined on the first call = the zero left padding of the reference) and is
// kept for the next call. A causal convolution's carry is its input window [B, C, context + T]:
// the next call writes its input after the context in place (Snake straight into it) instead of
// concatenating, and only reallocates when T changes. Loading helpers fold weight norms.
//
// Thread safety: pure functions (they write only their `carry` arguments); any thread.
#include <ATen/core/Tensor.h>

#include <string>

#include "core/error.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/s2_pro/codec_decoder.h"

namespace omnirt::models::s2_pro::codec {

// Reads tensors of the codec by name, checked against their expected shapes, as float32 on
// `device`. Errors name the tensor.
class CodecLoader {
  public:
    CodecLoader(const qwen3::WeightLookup& lookup, at::Device device)
        : lookup_(lookup), device_(device) {}
    [[nodiscard]] Result<at::Tensor> get(const std::string& name,
                                         const std::vector<std::int64_t>& shape) const;
    // A weight-normed conv with parametrization keys (`prefix`.conv.parametrizations...,
    // `prefix`.conv.bias): W = g * V / ||V|| over all dims but 0 (a transposed conv's weight is
    // [in, out, k]: g per input channel, the bias per output channel).
    [[nodiscard]] Result<CodecConv> weight_normed(const std::string& prefix,
                                                  const std::vector<std::int64_t>& shape,
                                                  std::int64_t dilation = 1,
                                                  bool transposed = false) const;
    // The legacy form (`prefix`.weight_g / weight_v / bias).
    [[nodiscard]] Result<CodecConv> legacy_weight_normed(
        const std::string& prefix, const std::vector<std::int64_t>& shape) const;
    [[nodiscard]] Result<CodecTransformer> transformer(const std::string& prefix,
                                                       std::int64_t layers, std::int64_t dim,
                                                       std::int64_t intermediate,
                                                       std::int64_t window) const;
    [[nodiscard]] Result<CodecConvNeXt> convnext(const std::string& prefix, std::int64_t dim,
                                                 std::int64_t intermediate) const;
    [[nodiscard]] Result<CodecResidualUnit> residual_unit(const std::string& prefix,
                                                          std::int64_t channels,
                                                          std::int64_t dilation) const;

  private:
    const qwen3::WeightLookup& lookup_;
    at::Device device_;
};

// The codec of a checkpoint directory: codec.safetensors, else the release's codec.pth (a
// torch.save state dict, read by checkpoint/torch_checkpoint.h without Python), keys as in
// codec.pth with an optional "generator." prefix stripped, sizes read off the shapes.
// not_found when neither file is there; invalid_argument naming the file when it is malformed.
struct CodecFile {
    std::string path;
    CodecSizes sizes;
    qwen3::WeightLookup lookup;  // keeps the mapped file alive
};
[[nodiscard]] Result<CodecFile> open_codec_file(const std::filesystem::path& directory);

// y = x + sin^2(alpha x) / (alpha + 1e-9), alpha [1, C, 1] float32; x [B, C, T] float32 or
// bfloat16 (computed in float32, rounded once). One pass, no libm (codec_snake.h).
[[nodiscard]] at::Tensor snake(const at::Tensor& x, const at::Tensor& alpha);

// Causal stride-1 conv: left context (k - 1) * dilation samples from the window in `carry`.
[[nodiscard]] at::Tensor causal_conv(const at::Tensor& x, const CodecConv& conv, at::Tensor& carry);

// causal_conv(snake(x, alpha), conv, carry), Snake written into the conv's window.
[[nodiscard]] at::Tensor snake_conv(const at::Tensor& x, const at::Tensor& alpha,
                                    const CodecConv& conv, at::Tensor& carry);

// A causal transposed conv (weight [in, out, k], k = 2 * stride in the decoder, k = stride in
// the upsampler; fact sheet 7.3) as the stride-1 conv of kernel k / stride it equals: output
// channel c * stride + j at frame t is sample t * stride + j of channel c (with k = 2 * stride
// tap 0 weighs frame t - 1, tap 1 frame t). oneDNN runs that as a plain convolution in either
// dtype (libtorch 1.13's bfloat16 ConvTranspose1d on the CPU is wrong, code2wav.cpp).
[[nodiscard]] CodecConv transposed_as_conv(const CodecConv& transposed, std::int64_t stride);

// Causal transposed conv of `conv` = transposed_as_conv(...), on snake(x, alpha) when alpha is
// defined: the previous input frame (if the kernel reads one) from `carry`; returns stride * T
// samples.
[[nodiscard]] at::Tensor causal_transposed(const at::Tensor& x, const at::Tensor& alpha,
                                           const CodecConv& conv, std::int64_t stride,
                                           at::Tensor& carry);

// Causal strided conv, not streaming (reference encoding): left padding k - stride, right
// padding up to a whole number of strides.
[[nodiscard]] at::Tensor causal_strided_conv(const at::Tensor& x, const CodecConv& conv,
                                             std::int64_t stride);

// ConvNeXt block: x + gamma * pw2(gelu(pw1(LayerNorm(dwconv(x))))).
[[nodiscard]] at::Tensor convnext(const at::Tensor& x, const CodecConvNeXt& block,
                                  at::Tensor& carry);

// Residual unit: x + conv1x1(snake(conv_k7_dilated(snake(x)))); one carry (the k1 conv needs
// none).
[[nodiscard]] at::Tensor residual_unit(const at::Tensor& x, const CodecResidualUnit& unit,
                                       at::Tensor& carry);

// The windowed causal transformer over frames x [B, C, T] at positions [first, first + T):
// attention of position i over [i - window + 1, i], earlier keys / values from keys[l] /
// values[l] (replaced by the last window - 1 frames').
[[nodiscard]] at::Tensor transformer(const at::Tensor& x, const CodecTransformer& module,
                                     std::int64_t first, std::vector<at::Tensor>& keys,
                                     std::vector<at::Tensor>& values);

}  // namespace omnirt::models::s2_pro::codec

#pragma once
// Pieces the Qwen3-Omni audio and vision encoders share: reading a weight by name with a shape
// check, and bidirectional attention over independent segments of one packed sequence.
//
// Thread safety: EncoderWeightReader is used by one thread during a load; segment_attention is a
// pure function.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace omnirt::models::qwen3_omni {

// Returns the named tensor of a checkpoint (a view of its mmap, say): not_found when absent.
// Checkpoint::tensor fits: [&](const std::string& n) { return checkpoint.tensor(n); }.
using WeightLookup = std::function<Result<Tensor>(const std::string& name)>;

// The compute dtypes the encoders accept: float32 and bfloat16, and float16 on CUDA only
// (libtorch's CPU float16 matmuls are missing or slow). invalid_argument / unimplemented naming
// `what` otherwise.
[[nodiscard]] Status check_encoder_dtype(const std::string& what, at::ScalarType dtype,
                                         const at::Device& device);

class EncoderWeightReader {
  public:
    // Names are prefix + name ("thinker.audio_tower." + "conv2d1.weight"). `lookup` must outlive
    // the reader.
    EncoderWeightReader(const WeightLookup& lookup, std::string prefix, at::ScalarType dtype,
                        at::Device device)
        : lookup_(lookup), prefix_(std::move(prefix)), dtype_(dtype), device_(device) {}

    // The tensor `name` of shape `expected`, contiguous in the reader's dtype and device (a view
    // of the source when it already is). Errors name the full tensor name: the lookup's error,
    // invalid_argument for a non-floating dtype or a shape other than `expected` (`meaning`
    // says which config values give it), resource_exhausted when libtorch cannot convert it.
    [[nodiscard]] Result<at::Tensor> get(const std::string& name,
                                         const std::vector<std::int64_t>& expected,
                                         const std::string& meaning) const;

  private:
    const WeightLookup& lookup_;
    std::string prefix_;
    at::ScalarType dtype_;
    at::Device device_;
};

struct LinearWeights {
    at::Tensor weight;  // [out, in]
    at::Tensor bias;    // [out]; undefined when the layer has none
};

struct LayerNormWeights {
    at::Tensor weight;
    at::Tensor bias;
};

// Reads name.weight [out, in] and, when `bias`, name.bias [out].
[[nodiscard]] Result<LinearWeights> read_linear(const EncoderWeightReader& reader,
                                                const std::string& name, std::int64_t out,
                                                std::int64_t in, const std::string& meaning,
                                                bool bias = true);
// Reads name.weight and name.bias, both [width].
[[nodiscard]] Result<LayerNormWeights> read_layer_norm(const EncoderWeightReader& reader,
                                                       const std::string& name, std::int64_t width,
                                                       const std::string& meaning);

[[nodiscard]] at::Tensor linear(const at::Tensor& x, const LinearWeights& layer);
[[nodiscard]] at::Tensor layer_norm(const at::Tensor& x, const LayerNormWeights& norm, double eps);

// Softmax attention of q, k, v [tokens, heads, head_dim] (one dtype and device) inside each
// segment: the tokens are cut into consecutive segments of `lengths` (summing to tokens), and a
// token attends to every token of its own segment and to nothing else (bidirectional,
// block-diagonal). Returns [tokens, heads * head_dim] contiguous.
//
// The math of transformers' eager attention: q k^T * scale in the compute dtype, softmax in
// float32 cast back to it, times v. Each maximal run of consecutive segments of equal length is
// one batched matmul pair ([segments, heads, length, head_dim]; libtorch 1.13 has no fused
// scaled_dot_product_attention): no mask of tokens^2 entries is built, and the common shapes (an
// audio's full 104-token windows, the frames of a video, images of one size) run as a few large
// matmuls. Score matrices are bounded (queries in blocks), so a large image does not need
// [heads, patches, patches] at once. The same values as attending with a block-diagonal mask.
[[nodiscard]] at::Tensor segment_attention(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v,
                                           const std::vector<std::int64_t>& lengths, double scale);

}  // namespace omnirt::models::qwen3_omni

#pragma once
// Rotary position embedding, split in two so that multimodal models replace only the part that
// differs: a RotaryEmbedding turns the tokens of a step into cos / sin tables, and
// apply_rotary() (layers.h) rotates queries and keys with them in the rotate-half ("neox")
// pairing: dim i pairs with dim i + head_dim / 2.
//
// DefaultRotaryEmbedding is Qwen3's text RoPE: the position of token i of a sequence is
// start_position + i. Qwen3-Omni's M-RoPE will be another implementation: it derives three
// positions per token (temporal, height, width; from the request's multimodal layout and its
// rope delta, looked up by request_id) and interleaves their frequencies into the same tables.
//
// Thread safety: driven by the model runner's thread, like forward(); not thread-safe.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <span>

#include "core/error.h"
#include "engine/model_runner.h"

namespace omnirt::models::qwen3 {

struct RotaryTables {
    at::Tensor cos;  // [total_tokens, head_dim] float32: the first half repeated in the second
    at::Tensor sin;
};

class RotaryEmbedding {
  public:
    virtual ~RotaryEmbedding() = default;
    // The tables of the new tokens of `batch`, rows in batch order (sequence by sequence, token
    // by token); `total_tokens` is their count. Errors: a position the embedding cannot encode.
    [[nodiscard]] virtual Result<RotaryTables> tables(std::span<const engine::SequenceInput> batch,
                                                      std::int64_t total_tokens) = 0;
};

// Standard RoPE: inv_freq_j = theta^(-2j / head_dim) for j < head_dim / 2, angle = position *
// inv_freq_j in float32 (as transformers computes it). The cos / sin of positions are cached in
// a table that grows (doubling) up to max_positions, so a position always gets the same values
// however the steps are batched or chunked.
class DefaultRotaryEmbedding final : public RotaryEmbedding {
  public:
    DefaultRotaryEmbedding(int head_dim, double theta, std::int64_t max_positions,
                           at::Device device = at::kCPU);

    [[nodiscard]] Result<RotaryTables> tables(std::span<const engine::SequenceInput> batch,
                                              std::int64_t total_tokens) override;

  private:
    void grow_to(std::int64_t positions);

    int head_dim_;
    double theta_;
    std::int64_t max_positions_;
    at::Device device_;
    at::Tensor inverse_frequencies_;  // [head_dim / 2] float32
    at::Tensor cos_cache_;            // [cached positions, head_dim] float32
    at::Tensor sin_cache_;
};

}  // namespace omnirt::models::qwen3

#pragma once
// Rotary position embedding, split in two so that multimodal models replace only the part that
// differs: a RotaryEmbedding turns the tokens of a step into cos / sin tables, and
// apply_rotary() (layers.h) rotates queries and keys with them in the rotate-half ("neox")
// pairing: dim i pairs with dim i + head_dim / 2.
//
// Positions come from SequenceInput::positions when given, else token i of a sequence is at
// start_position + i. DefaultRotaryEmbedding is Qwen3's text RoPE (one axis);
// InterleavedMRotaryEmbedding is Qwen3-Omni's M-RoPE (three axes: temporal, height, width, whose
// frequencies interleave in the same tables; with equal axes it is the text RoPE).
//
// Thread safety: driven by the model runner's thread, like forward(); not thread-safe.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
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
    // Position axes SequenceInput::positions may have (fewer rows repeat the last one).
    [[nodiscard]] virtual int axes() const { return 1; }
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

// M-RoPE with interleaved sections (Qwen3-Omni, fact sheet section 4.4): frequency slot j of the
// head_dim / 2 takes its angle from axis H when j % 3 == 1 and j < 3 * sections[1], from axis W
// when j % 3 == 2 and j < 3 * sections[2], else from axis T; inv_freq and the rotate-half
// pairing are the text RoPE's. Positions of one axis (or none) apply to all three.
class InterleavedMRotaryEmbedding final : public RotaryEmbedding {
  public:
    // sections: slots of T, H, W (e.g. 24, 20, 20), summing to head_dim / 2.
    InterleavedMRotaryEmbedding(int head_dim, double theta, std::int64_t max_positions,
                                std::array<int, 3> sections, at::Device device = at::kCPU);

    [[nodiscard]] Result<RotaryTables> tables(std::span<const engine::SequenceInput> batch,
                                              std::int64_t total_tokens) override;
    [[nodiscard]] int axes() const override { return 3; }

  private:
    int head_dim_;
    std::int64_t max_positions_;
    at::Device device_;
    at::Tensor inverse_frequencies_;  // [head_dim / 2] float32
    at::Tensor axis_of_slot_;         // [head_dim / 2] int64: 0 T, 1 H, 2 W
};

// The positions of a batch's new tokens, [axes, total_tokens] int64 on the CPU: each sequence's
// SequenceInput::positions (a row per axis; fewer rows repeat the last) or start_position + i.
// out_of_range when a position is negative or not below max_positions.
[[nodiscard]] Result<at::Tensor> batch_positions(std::span<const engine::SequenceInput> batch,
                                                 std::int64_t total_tokens, int axes,
                                                 std::int64_t max_positions);

}  // namespace omnirt::models::qwen3

#include "models/qwen3/rotary_embedding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

namespace omnirt::models::qwen3 {
namespace {
constexpr std::int64_t kInitialCachedPositions = 4096;
}

DefaultRotaryEmbedding::DefaultRotaryEmbedding(int head_dim, double theta,
                                               std::int64_t max_positions, at::Device device)
    : head_dim_(head_dim), theta_(theta), max_positions_(max_positions), device_(device) {
    // 1 / theta^(arange(0, d, 2) / d), computed in float32 like transformers.
    const at::Tensor exponents = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / head_dim;
    inverse_frequencies_ = at::pow(theta, exponents).reciprocal();
}

void DefaultRotaryEmbedding::grow_to(std::int64_t positions) {
    std::int64_t capacity = cos_cache_.defined() ? cos_cache_.size(0) : 0;
    if (positions <= capacity) return;
    capacity = std::max(capacity, kInitialCachedPositions);
    while (capacity < positions) capacity *= 2;
    capacity = std::min(capacity, max_positions_);
    const at::Tensor angles =
        at::outer(at::arange(capacity, at::kLong).to(at::kFloat), inverse_frequencies_);
    const at::Tensor both_halves = at::cat({angles, angles}, 1);
    cos_cache_ = both_halves.cos().to(device_);
    sin_cache_ = both_halves.sin().to(device_);
}

Result<RotaryTables> DefaultRotaryEmbedding::tables(std::span<const engine::SequenceInput> batch,
                                                    std::int64_t total_tokens) {
    std::vector<std::int64_t> positions;
    positions.reserve(static_cast<std::size_t>(total_tokens));
    std::int64_t end = 0;
    for (const engine::SequenceInput& sequence : batch) {
        for (std::size_t i = 0; i < sequence.tokens.size(); ++i) {
            positions.push_back(sequence.start_position + static_cast<std::int64_t>(i));
        }
        end = std::max(end,
                       sequence.start_position + static_cast<std::int64_t>(sequence.tokens.size()));
    }
    if (static_cast<std::int64_t>(positions.size()) != total_tokens) {
        return fail(ErrorCode::internal, "rotary embedding: batch tokens differ from total_tokens");
    }
    if (end > max_positions_) {
        return fail(ErrorCode::out_of_range, "rotary embedding: position " +
                                                 std::to_string(end - 1) + " is beyond the " +
                                                 std::to_string(max_positions_) + " positions");
    }
    grow_to(end);
    const at::Tensor index = at::tensor(positions, at::kLong).to(device_);
    return RotaryTables{.cos = cos_cache_.index_select(0, index),
                        .sin = sin_cache_.index_select(0, index)};
}

}  // namespace omnirt::models::qwen3

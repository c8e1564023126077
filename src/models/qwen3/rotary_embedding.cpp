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

Result<at::Tensor> batch_positions(std::span<const engine::SequenceInput> batch,
                                   std::int64_t total_tokens, int axes,
                                   std::int64_t max_positions) {
    at::Tensor out = at::empty({axes, total_tokens}, at::kLong);
    std::int64_t* data = out.data_ptr<std::int64_t>();
    std::int64_t column = 0;
    for (const engine::SequenceInput& sequence : batch) {
        const auto count = static_cast<std::int64_t>(sequence.tokens.size());
        if (column + count > total_tokens) break;
        if (sequence.positions.defined()) {
            at::Tensor given = sequence.positions.to(at::kCPU, at::kLong).contiguous();
            if (given.dim() == 1) given = given.unsqueeze(0);
            const std::int64_t rows = given.size(0);
            if (rows > axes || given.size(1) != count) {
                return fail(ErrorCode::invalid_argument, "rotary embedding: sequence '" +
                                                             sequence.request_id +
                                                             "' has positions of the wrong shape");
            }
            const std::int64_t* source = given.data_ptr<std::int64_t>();
            for (int a = 0; a < axes; ++a) {
                const std::int64_t row = std::min<std::int64_t>(a, rows - 1);
                std::copy_n(source + row * count, count, data + a * total_tokens + column);
            }
        } else {
            for (int a = 0; a < axes; ++a) {
                for (std::int64_t i = 0; i < count; ++i) {
                    data[a * total_tokens + column + i] = sequence.start_position + i;
                }
            }
        }
        column += count;
    }
    if (column != total_tokens) {
        return fail(ErrorCode::internal, "rotary embedding: batch tokens differ from total_tokens");
    }
    if (total_tokens > 0) {
        const std::int64_t low = out.min().item<std::int64_t>();
        const std::int64_t high = out.max().item<std::int64_t>();
        if (low < 0 || high >= max_positions) {
            return fail(ErrorCode::out_of_range,
                        "rotary embedding: position " + std::to_string(low < 0 ? low : high) +
                            " is outside the " + std::to_string(max_positions) + " positions");
        }
    }
    return out;
}

Result<RotaryTables> DefaultRotaryEmbedding::tables(std::span<const engine::SequenceInput> batch,
                                                    std::int64_t total_tokens) {
    OMNI_TRY(const at::Tensor positions,
             batch_positions(batch, total_tokens, /*axes=*/1, max_positions_));
    const at::Tensor row = positions.select(0, 0);
    grow_to(total_tokens > 0 ? row.max().item<std::int64_t>() + 1 : 0);
    const at::Tensor index = row.to(device_);
    return RotaryTables{.cos = cos_cache_.index_select(0, index),
                        .sin = sin_cache_.index_select(0, index)};
}

InterleavedMRotaryEmbedding::InterleavedMRotaryEmbedding(int head_dim, double theta,
                                                         std::int64_t max_positions,
                                                         std::array<int, 3> sections,
                                                         at::Device device)
    : head_dim_(head_dim), max_positions_(max_positions), device_(device) {
    const at::Tensor exponents = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / head_dim;
    inverse_frequencies_ = at::pow(theta, exponents).reciprocal();
    const int slots = head_dim / 2;
    std::vector<std::int64_t> axis(static_cast<std::size_t>(slots), 0);
    for (int j = 0; j < slots; ++j) {
        if (j % 3 == 1 && j < 3 * sections[1]) axis[static_cast<std::size_t>(j)] = 1;
        if (j % 3 == 2 && j < 3 * sections[2]) axis[static_cast<std::size_t>(j)] = 2;
    }
    axis_of_slot_ = at::tensor(axis, at::kLong);
}

Result<RotaryTables> InterleavedMRotaryEmbedding::tables(
    std::span<const engine::SequenceInput> batch, std::int64_t total_tokens) {
    OMNI_TRY(const at::Tensor positions,
             batch_positions(batch, total_tokens, /*axes=*/3, max_positions_));
    // angles[a, t, j] = position[a, t] * inv_freq[j] (float32, as transformers), then slot j
    // takes its axis' angle.
    const at::Tensor angles =
        positions.to(at::kFloat).unsqueeze(2) * inverse_frequencies_.view({1, 1, -1});
    const at::Tensor chosen =
        angles.gather(0, axis_of_slot_.view({1, 1, -1}).expand({1, total_tokens, head_dim_ / 2}))
            .squeeze(0);
    const at::Tensor both_halves = at::cat({chosen, chosen}, 1);
    return RotaryTables{.cos = both_halves.cos().to(device_), .sin = both_halves.sin().to(device_)};
}

}  // namespace omnirt::models::qwen3

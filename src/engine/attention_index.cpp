#include "engine/attention_index.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace omnirt::engine {
namespace {

struct Extent {
    std::int64_t count;
    std::int64_t length;
};

}  // namespace

AttentionIndex attention_index(std::span<const SequenceInput> batch, std::int64_t block_size,
                               std::int64_t num_heads, at::Device device,
                               std::int64_t score_budget_bytes) {
    OMNI_CHECK(block_size > 0 && num_heads > 0, "attention_index: sizes must be positive");
    AttentionIndex index;
    // Groups: contiguous runs whose padded float32 scores fit the budget (at least one sequence).
    std::vector<Extent> extents;
    extents.reserve(batch.size());
    for (const SequenceInput& sequence : batch) {
        const auto count = static_cast<std::int64_t>(sequence.tokens.size());
        extents.push_back({count, sequence.start_position + count});
    }
    std::int64_t row = 0;
    for (std::size_t first = 0; first < batch.size();) {
        AttentionGroup group{.first_sequence = static_cast<std::int64_t>(first), .first_row = row};
        std::size_t end = first;
        while (end < batch.size()) {
            const std::int64_t max_new = std::max(group.max_new, extents[end].count);
            const std::int64_t max_length = std::max(group.max_length, extents[end].length);
            const std::int64_t sequences = static_cast<std::int64_t>(end - first) + 1;
            const double bytes = 4.0 * static_cast<double>(sequences) *
                                 static_cast<double>(num_heads) * static_cast<double>(max_new) *
                                 static_cast<double>(max_length);
            if (end > first && bytes > static_cast<double>(score_budget_bytes)) break;
            group.max_new = max_new;
            group.max_length = max_length;
            group.sequences = sequences;
            group.rows += extents[end].count;
            ++end;
        }
        row += group.rows;
        index.groups.push_back(std::move(group));
        first = end;
    }
    index.total_rows = row;

    // Every group's integers in one host buffer, copied to the device once.
    std::int64_t total = 0;
    for (const AttentionGroup& group : index.groups) {
        total += group.sequences * (group.max_length + group.max_new + 1) + group.rows;
    }
    at::Tensor host = at::empty({std::max<std::int64_t>(total, 1)}, at::kLong);
    if (device.is_cuda()) host = host.pin_memory();
    std::int64_t* data = host.data_ptr<std::int64_t>();
    std::int64_t at_offset = 0;
    std::vector<std::int64_t> offsets;  // per group: slots, query_rows, starts, take
    for (AttentionGroup& group : index.groups) {
        offsets.push_back(at_offset);
        std::int64_t* slots = data + at_offset;
        std::int64_t* query_rows = slots + group.sequences * group.max_length;
        std::int64_t* starts = query_rows + group.sequences * group.max_new;
        std::int64_t* take = starts + group.sequences;
        std::int64_t relative_row = 0;
        for (std::int64_t s = 0; s < group.sequences; ++s) {
            const SequenceInput& sequence =
                batch[static_cast<std::size_t>(group.first_sequence + s)];
            const Extent extent = extents[static_cast<std::size_t>(group.first_sequence + s)];
            for (std::int64_t p = 0; p < group.max_length; ++p) {
                std::int64_t slot = 0;
                if (p < extent.length) {
                    const std::int64_t block =
                        sequence.block_table[static_cast<std::size_t>(p / block_size)];
                    slot = block * block_size + p % block_size;
                }
                slots[s * group.max_length + p] = slot;
            }
            for (std::int64_t i = 0; i < group.max_new; ++i) {
                // Padded query rows repeat the sequence's first row; their results are dropped.
                query_rows[s * group.max_new + i] = relative_row + (i < extent.count ? i : 0);
            }
            starts[s] = sequence.start_position;
            for (std::int64_t i = 0; i < extent.count; ++i)
                take[relative_row + i] = s * group.max_new + i;
            relative_row += extent.count;
        }
        at_offset += group.sequences * (group.max_length + group.max_new + 1) + group.rows;
    }
    const at::Tensor on_device = host.to(device, /*non_blocking=*/device.is_cuda());
    for (std::size_t g = 0; g < index.groups.size(); ++g) {
        AttentionGroup& group = index.groups[g];
        std::int64_t offset = offsets[g];
        group.slots = on_device.narrow(0, offset, group.sequences * group.max_length);
        offset += group.sequences * group.max_length;
        group.query_rows = on_device.narrow(0, offset, group.sequences * group.max_new);
        offset += group.sequences * group.max_new;
        group.starts = on_device.narrow(0, offset, group.sequences).view({group.sequences, 1});
        offset += group.sequences;
        group.take = on_device.narrow(0, offset, group.rows);
    }
    return index;
}

at::Tensor paged_attention_gathered(const at::Tensor& query, const at::Tensor& keys,
                                    const at::Tensor& values, const AttentionIndex& index,
                                    double scale) {
    OMNI_CHECK(query.dim() == 3 && keys.dim() == 4 && values.sizes() == keys.sizes(),
               "paged_attention_gathered: query [tokens, heads, dim] and a cache layer [blocks, "
               "block_size, kv_heads, dim] expected");
    OMNI_CHECK(query.size(0) == index.total_rows && query.size(2) == keys.size(3) &&
                   query.size(1) % keys.size(2) == 0,
               "paged_attention_gathered: the query does not match the index or the cache");
    const std::int64_t heads = query.size(1);
    const std::int64_t dim = query.size(2);
    const std::int64_t kv_heads = keys.size(2);
    const std::int64_t group_size = heads / kv_heads;
    const at::Tensor flat_keys = keys.view({-1, kv_heads, dim});
    const at::Tensor flat_values = values.view({-1, kv_heads, dim});
    const bool one_group = index.groups.size() == 1;
    at::Tensor output;
    if (!one_group) output = at::empty_like(query, at::MemoryFormat::Contiguous);
    for (const AttentionGroup& group : index.groups) {
        const std::int64_t s = group.sequences;
        const std::int64_t n = group.max_new;
        const std::int64_t l = group.max_length;
        const at::Tensor rows = query.narrow(0, group.first_row, group.rows);
        // [s, kv_heads, group_size * n, dim]
        const at::Tensor q = rows.index_select(0, group.query_rows)
                                 .to(at::kFloat)
                                 .view({s, n, kv_heads, group_size, dim})
                                 .permute({0, 2, 3, 1, 4})
                                 .reshape({s, kv_heads, group_size * n, dim});
        // [s, kv_heads, dim, l] and [s, kv_heads, l, dim]
        const at::Tensor k = flat_keys.index_select(0, group.slots)
                                 .to(at::kFloat)
                                 .view({s, l, kv_heads, dim})
                                 .permute({0, 2, 3, 1});
        const at::Tensor v = flat_values.index_select(0, group.slots)
                                 .to(at::kFloat)
                                 .view({s, l, kv_heads, dim})
                                 .permute({0, 2, 1, 3});
        at::Tensor scores = at::matmul(q, k).mul_(scale).view({s, kv_heads, group_size, n, l});
        // Query i of sequence s sits at starts[s] + i and sees keys at positions <= its own.
        const auto long_options = at::TensorOptions().dtype(at::kLong).device(query.device());
        const at::Tensor query_positions = group.starts + at::arange(n, long_options).view({1, n});
        const at::Tensor future =
            at::arange(l, long_options).view({1, 1, l}) > query_positions.unsqueeze(2);  // [s,n,l]
        scores.masked_fill_(future.view({s, 1, 1, n, l}), -std::numeric_limits<float>::infinity());
        const at::Tensor probabilities = scores.softmax(-1).view({s, kv_heads, group_size * n, l});
        const at::Tensor attended = at::matmul(probabilities, v)  // [s, kv_heads, g * n, dim]
                                        .view({s, kv_heads, group_size, n, dim})
                                        .permute({0, 3, 1, 2, 4})
                                        .reshape({s * n, heads, dim})
                                        .index_select(0, group.take)
                                        .to(query.scalar_type());
        if (one_group) return attended;
        output.narrow(0, group.first_row, group.rows).copy_(attended);
    }
    return output;
}

}  // namespace omnirt::engine

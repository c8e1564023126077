#pragma once
// Batched paged attention for devices without omnirt's CPU kernel (CUDA): the whole batch in a
// fixed number of operators, with no host-device synchronisation.
//
// AttentionIndex holds what every layer of one forward needs on the device (the cache slot of
// each key position, the query row of each padded query, the sequences' start positions), built
// once per forward on the host and copied to the device in one transfer (non-blocking from
// pinned memory on CUDA). paged_attention_gathered then gathers the keys and values of a group
// of sequences into padded [sequences, max_length] tensors and runs one masked softmax over
// them: about twenty kernels per layer whatever the batch, where paged_attention_reference
// launches that many per sequence and copies a block table to the device each time.
//
// Sequences are grouped (contiguous runs of the batch) so that one group's float32 scores,
// sequences x heads x max_new_tokens x max_length, stay under `score_budget_bytes`: decode
// batches form one group; long prefills are split. Padding costs compute, not correctness:
// padded query rows are discarded and padded keys are masked.
//
// Same contract and results as paged_attention_reference (paged_attention.h) up to float
// rounding: scores, softmax and the weighted sum accumulate in float32.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model_runner.h"

namespace omnirt::engine {

struct AttentionGroup {
    std::int64_t first_sequence = 0;
    std::int64_t sequences = 0;
    std::int64_t first_row = 0;  // the group's query rows: [first_row, first_row + rows)
    std::int64_t rows = 0;
    std::int64_t max_new = 0;     // longest run of new tokens in the group (padded query width)
    std::int64_t max_length = 0;  // longest context (start + new tokens)
    at::Tensor slots;             // int64 [sequences * max_length]; padding reads slot 0
    at::Tensor query_rows;        // int64 [sequences * max_new], rows relative to first_row
    at::Tensor starts;            // int64 [sequences, 1] start positions
    at::Tensor take;              // int64 [rows]: padded row (s * max_new + i) of each real row
};

struct AttentionIndex {
    std::vector<AttentionGroup> groups;
    std::int64_t total_rows = 0;
};

inline constexpr std::int64_t kDefaultScoreBudgetBytes = 256ll << 20;

// `num_heads`: query heads of this rank (sizes the score budget).
[[nodiscard]] AttentionIndex attention_index(
    std::span<const SequenceInput> batch, std::int64_t block_size, std::int64_t num_heads,
    at::Device device, std::int64_t score_budget_bytes = kDefaultScoreBudgetBytes);

// query [index.total_rows, heads, dim]; keys / values one cache layer. The result has the
// query's dtype and shape.
[[nodiscard]] at::Tensor paged_attention_gathered(const at::Tensor& query, const at::Tensor& keys,
                                                  const at::Tensor& values,
                                                  const AttentionIndex& index, double scale);

}  // namespace omnirt::engine

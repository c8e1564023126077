#pragma once
// Causal attention of a batch of sequences over their paged KV cache (kv_cache.h).
//
// `query` holds the new tokens of every sequence of `batch`, concatenated in batch order:
// [total_tokens, num_heads, head_dim]. Token i of sequence s sits at position
// s.start_position + i and attends to positions [0, s.start_position + i] of that sequence,
// whose keys and values must already be in `keys` / `values` ([num_blocks, block_size,
// num_kv_heads, head_dim], one layer of a KVCache) at the slots of s.block_table. Grouped-query
// attention: query head h reads kv head h / (num_heads / num_kv_heads) (the Hugging Face
// repeat_kv order). Scores, softmax and the weighted sum accumulate in float32; the result has
// the query's dtype and shape.
//
// Preconditions (the model runner validates the batch; broken ones abort): the shapes agree,
// num_heads is a multiple of num_kv_heads, and every block table covers the positions it is
// asked for with ids inside the cache.
//
// Thread safety: pure functions; may run on any thread (the CPU kernel uses the ATen intra-op
// thread pool).
#include <ATen/core/Tensor.h>

#include <span>

#include "engine/model_runner.h"

namespace omnirt::engine {

// Dispatches to the fastest implementation for the tensors' device and dtype: the CPU kernel
// for float32 / bfloat16 / float16 on the CPU, paged_attention_gathered (attention_index.h)
// otherwise. A model that calls it for every layer should build the AttentionIndex once per
// forward and call paged_attention_gathered itself (Qwen3Model does).
[[nodiscard]] at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& keys,
                                         const at::Tensor& values,
                                         std::span<const SequenceInput> batch, double scale);

// Device-neutral implementation with ATen operators, one sequence at a time (gather its keys and
// values, batched matmul, masked softmax): the oracle of the CPU kernel and of the gathered path.
[[nodiscard]] at::Tensor paged_attention_reference(const at::Tensor& query, const at::Tensor& keys,
                                                   const at::Tensor& values,
                                                   std::span<const SequenceInput> batch,
                                                   double scale);

// The CPU kernel: reads keys and values in place from their blocks (no gather copy), block by
// block with an online softmax (memory bounded by one block, whatever the context length); one
// task per tile of up to 8 query rows of a sequence, which share each block read, on the
// intra-op thread pool. CPU tensors of float32, bfloat16 or float16 only (aborts otherwise).
[[nodiscard]] at::Tensor paged_attention_cpu(const at::Tensor& query, const at::Tensor& keys,
                                             const at::Tensor& values,
                                             std::span<const SequenceInput> batch, double scale);

}  // namespace omnirt::engine

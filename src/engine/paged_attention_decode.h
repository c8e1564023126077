#pragma once
// Internal to paged_attention.cpp: the AVX-512 kernel for one query row of a sequence (a decode
// step) with head_dim 128, the shape of the Qwen3 family. Same arithmetic as the general CPU
// kernel (float32 queries scaled first, keys and values widened exactly to float32, float32
// sums, an online softmax per block); per block and kv head the heads of its group share each
// widened key and value vector, and the group's accumulators stay in registers across the
// block's positions. bfloat16 with blocks of 16 on CPUs with AVX512-BF16 takes a leaner kernel
// (vdpbf16ps scores, vectorized exp, values weighed with vdpbf16ps on weights rounded to
// bfloat16, the next block prefetched); see the .cpp.
//
// Thread safety: pure functions; the caller runs them on its own threads.
#include <c10/util/BFloat16.h>

#include <cstdint>
#include <vector>

#include "engine/model_runner.h"

namespace omnirt::engine::detail {

struct DecodeShape {
    std::int64_t heads;
    std::int64_t kv_heads;
    std::int64_t head_dim;
    std::int64_t block_size;
    // The kv heads [kv_begin, kv_end) computed by a call, with their groups of query heads
    // (heads are independent: a row split among threads gives the bits of a whole call).
    // Callers set both; an empty range is refused by decode_kernel_applies.
    std::int64_t kv_begin = 0;
    std::int64_t kv_end = 0;
};

// True when this CPU has AVX-512F, head_dim is 128 (heads a multiple of kv heads) and the kv
// head range is a non-empty part of [0, kv_heads).
[[nodiscard]] bool decode_kernel_applies(const DecodeShape& shape);

// True when decode_kernel_applies and bfloat16 rows take the AVX512-BF16 kernel (blocks of 16
// positions, a CPU with AVX512-BF16).
[[nodiscard]] bool bfloat16_decode_kernel_applies(const DecodeShape& shape);

// Attention of the query row `query` ([heads, head_dim]) at `position` of `sequence` over the
// positions [0, position] of its block table, for the heads of the shape's kv head range;
// writes those heads of `output` ([heads, head_dim]).
void attend_decode(const SequenceInput& sequence, std::int64_t position, const DecodeShape& shape,
                   const float* query, const float* keys, const float* values, double scale,
                   float* output, std::vector<float>& scratch);
void attend_decode(const SequenceInput& sequence, std::int64_t position, const DecodeShape& shape,
                   const c10::BFloat16* query, const c10::BFloat16* keys,
                   const c10::BFloat16* values, double scale, c10::BFloat16* output,
                   std::vector<float>& scratch);

}  // namespace omnirt::engine::detail

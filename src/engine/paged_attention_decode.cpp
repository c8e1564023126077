#include "engine/paged_attention_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include "engine/lane_sums.h"
#define OMNIRT_HAVE_DECODE_KERNEL 1
#define OMNIRT_AVX512 __attribute__((target("avx512f")))
#define OMNIRT_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
// GCC 12 warns about its own _mm512_reduce_add_ps.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define OMNIRT_HAVE_DECODE_KERNEL 0
#endif

namespace omnirt::engine::detail {
namespace {

#if OMNIRT_HAVE_DECODE_KERNEL

constexpr std::int64_t kDim = 128;
constexpr int kVectors = kDim / 16;  // float32 vectors of one head

OMNIRT_AVX512 [[gnu::always_inline]] inline __m512 load16(const float* p) {
    return _mm512_loadu_ps(p);
}
// Sixteen bfloat16 values widened exactly (a 16-bit shift into float32).
OMNIRT_AVX512 [[gnu::always_inline]] inline __m512 load16(const c10::BFloat16* p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// accumulators of heads [0, NJ) += p[j][slot] * v[slot] over `count` positions, after scaling
// them by their corrections; a, p and corrections are per head.
template <int NJ, class T>
OMNIRT_AVX512 [[gnu::always_inline]] inline void accumulate_values(
    float* const (&accumulators)[NJ], const float* const (&weights)[NJ],
    const float (&corrections)[NJ], const T* values, std::int64_t slot_width, std::int64_t count) {
    __m512 acc[NJ][kVectors];
#pragma GCC unroll 2
    for (int j = 0; j < NJ; ++j) {
        const __m512 correction = _mm512_set1_ps(corrections[j]);
#pragma GCC unroll 8
        for (int c = 0; c < kVectors; ++c) {
            acc[j][c] = _mm512_mul_ps(_mm512_loadu_ps(accumulators[j] + 16 * c), correction);
        }
    }
    for (std::int64_t slot = 0; slot < count; ++slot) {
        const T* row = values + slot * slot_width;
        __m512 v[kVectors];
#pragma GCC unroll 8
        for (int c = 0; c < kVectors; ++c) v[c] = load16(row + 16 * c);
#pragma GCC unroll 2
        for (int j = 0; j < NJ; ++j) {
            const __m512 p = _mm512_set1_ps(weights[j][slot]);
#pragma GCC unroll 8
            for (int c = 0; c < kVectors; ++c) acc[j][c] = _mm512_fmadd_ps(p, v[c], acc[j][c]);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 8
        for (int c = 0; c < kVectors; ++c) _mm512_storeu_ps(accumulators[j] + 16 * c, acc[j][c]);
    }
}

template <class T>
OMNIRT_AVX512 void decode_row(const SequenceInput& sequence, std::int64_t position,
                              const DecodeShape& shape, const T* query, const T* keys,
                              const T* values, double scale, T* output,
                              std::vector<float>& scratch) {
    const std::int64_t heads = shape.heads;
    const std::int64_t kv_begin = shape.kv_begin;
    const std::int64_t kv_end = shape.kv_end;
    const std::int64_t group = heads / shape.kv_heads;
    const std::int64_t block_size = shape.block_size;
    const std::int64_t slot_width = shape.kv_heads * kDim;
    const std::int64_t block_stride = block_size * slot_width;
    // Scratch: scaled queries and accumulators [heads * 128], scores [heads * block_size],
    // maxima, normalizers and corrections [heads].
    scratch.resize(static_cast<std::size_t>(2 * heads * kDim + heads * block_size + 3 * heads));
    float* q = scratch.data();
    float* accumulators = q + heads * kDim;
    float* scores = accumulators + heads * kDim;
    float* maxima = scores + heads * block_size;
    float* normalizers = maxima + heads;
    float* corrections = normalizers + heads;
    const auto scale_f = static_cast<float>(scale);
    const std::int64_t h_begin = kv_begin * group;
    const std::int64_t h_end = kv_end * group;
    for (std::int64_t i = h_begin * kDim; i < h_end * kDim; ++i) {
        q[i] = static_cast<float>(query[i]) * scale_f;
        accumulators[i] = 0.0f;
    }
    for (std::int64_t h = h_begin; h < h_end; ++h) {
        maxima[h] = -std::numeric_limits<float>::infinity();
        normalizers[h] = 0.0f;
    }

    const std::int64_t length = position + 1;
    for (std::int64_t first = 0; first < length; first += block_size) {
        const std::int64_t block =
            sequence.block_table[static_cast<std::size_t>(first / block_size)];
        const std::int64_t count = std::min(block_size, length - first);
        for (std::int64_t g = kv_begin; g < kv_end; ++g) {
            const std::int64_t h0 = g * group;
            const T* k = keys + block * block_stride + g * kDim;
            const T* v = values + block * block_stride + g * kDim;
            // Scores of the group's heads: each key vector is widened once.
            for (std::int64_t slot = 0; slot < count; ++slot) {
                const T* row = k + slot * slot_width;
                __m512 kv[kVectors];
#pragma GCC unroll 8
                for (int c = 0; c < kVectors; ++c) kv[c] = load16(row + 16 * c);
                for (std::int64_t h = h0; h < h0 + group; ++h) {
                    const float* qh = q + h * kDim;
                    __m512 sum = _mm512_mul_ps(_mm512_loadu_ps(qh), kv[0]);
#pragma GCC unroll 8
                    for (int c = 1; c < kVectors; ++c) {
                        sum = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * c), kv[c], sum);
                    }
                    scores[h * block_size + slot] = _mm512_reduce_add_ps(sum);
                }
            }
            // Online softmax: new maxima, corrections of the running sums, weights.
            for (std::int64_t h = h0; h < h0 + group; ++h) {
                float* s = scores + h * block_size;
                float block_max = -std::numeric_limits<float>::infinity();
                for (std::int64_t slot = 0; slot < count; ++slot) {
                    block_max = std::max(block_max, s[slot]);
                }
                const float new_max = std::max(maxima[h], block_max);
                corrections[h] = std::exp(maxima[h] - new_max);  // 0 at the start
                maxima[h] = new_max;
                float sum = 0.0f;
                for (std::int64_t slot = 0; slot < count; ++slot) {
                    s[slot] = std::exp(s[slot] - new_max);
                    sum += s[slot];
                }
                normalizers[h] = normalizers[h] * corrections[h] + sum;
            }
            // Weighted values, two heads at a time (their accumulators fit the registers).
            std::int64_t h = h0;
            for (; h + 2 <= h0 + group; h += 2) {
                float* const acc[2] = {accumulators + h * kDim, accumulators + (h + 1) * kDim};
                const float* const w[2] = {scores + h * block_size, scores + (h + 1) * block_size};
                const float c[2] = {corrections[h], corrections[h + 1]};
                accumulate_values<2>(acc, w, c, v, slot_width, count);
            }
            if (h < h0 + group) {
                float* const acc[1] = {accumulators + h * kDim};
                const float* const w[1] = {scores + h * block_size};
                const float c[1] = {corrections[h]};
                accumulate_values<1>(acc, w, c, v, slot_width, count);
            }
        }
    }
    for (std::int64_t h = h_begin; h < h_end; ++h) {
        const float inverse = 1.0f / normalizers[h];
        for (std::int64_t i = 0; i < kDim; ++i) {
            output[h * kDim + i] = static_cast<T>(accumulators[h * kDim + i] * inverse);
        }
    }
}

// The bfloat16 kernel for blocks of 16 positions on CPUs with AVX512-BF16. Per (position, head)
// the general kernel above spends a widening, eight FMAs, a full horizontal sum and a scalar
// exp; here the scores take four vdpbf16ps on the bfloat16 query and key bits (the products
// are exact in float32, the sums float32; the scale is applied to the sums), a block's 16 sums
// are reduced together, the exp is vectorized, and the weighted values take vdpbf16ps too, on
// weights rounded to bfloat16 (see accumulate_values_bf16).

// exp(x) for x <= 0 (lanes of -inf give 0): 2^n * p(r), x = n ln2 + r, |r| <= ln2 / 2, p the
// degree-7 Taylor polynomial (truncation below 1e-8 relative; about 1-2 ulp after rounding).
OMNIRT_AVX512_BF16 [[gnu::always_inline]] inline __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // exp is 0 in float32 below
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2 = hi + lo, hi exact
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// Weighted values on vdpbf16ps: the weights of slots 2s and 2s + 1 are rounded to bfloat16 and
// paired with the two value rows interleaved element by element, so that one
// instruction adds p[2s] v[2s][d] + p[2s + 1] v[2s + 1][d] for 16 dims. Interleaving works in
// 128-bit lanes, so the accumulators hold the 128 dims permuted: vector 2c + e, lane 4l + i is
// dim 32c + 8l + 4e + i (see value_index). A slot past `count` is never read (its row may hold
// anything); an odd last slot is paired with zeros. The rounded weights are exp(score - running
// maximum), before the online softmax's corrections and normalization, while the normalizer sums
// them unrounded: a relative error of the same size (2^-9) as transformers' rounding of its
// normalized probabilities to bfloat16 before the value matmul, but not the same bits (nor those
// of the prefill tile kernel, which widens values to float32).
inline std::int64_t value_index(std::int64_t d) {
    const std::int64_t c = d >> 5;
    const std::int64_t r = d & 31;
    return 16 * (2 * c + ((r >> 2) & 1)) + 4 * (r >> 3) + (r & 3);
}

// One pair of slots for accumulate_values_bf16 (`second` null: the pair's second row is zeros).
template <int NJ>
OMNIRT_AVX512_BF16 [[gnu::always_inline]] inline void values_pair_step(
    __m512 (&acc)[NJ][kVectors], const std::uint32_t (&pairs)[NJ][8], const c10::BFloat16* first,
    const c10::BFloat16* second, std::int64_t pair) {
    __m512i v[kVectors];
#pragma GCC unroll 4
    for (int c = 0; c < kVectors / 2; ++c) {
        const __m512i a = _mm512_loadu_si512(first + 32 * c);
        const __m512i b =
            second != nullptr ? _mm512_loadu_si512(second + 32 * c) : _mm512_setzero_si512();
        v[2 * c] = _mm512_unpacklo_epi16(a, b);
        v[2 * c + 1] = _mm512_unpackhi_epi16(a, b);
    }
#pragma GCC unroll 2
    for (int j = 0; j < NJ; ++j) {
        const __m512bh p = (__m512bh)_mm512_set1_epi32(static_cast<int>(pairs[j][pair]));
#pragma GCC unroll 8
        for (int c = 0; c < kVectors; ++c) {
            acc[j][c] = _mm512_dpbf16_ps(acc[j][c], (__m512bh)v[c], p);
        }
    }
}

// accumulators of heads [0, NJ) += weights[j][slot] * values[slot] over `count` slots, after
// scaling them by their corrections.
template <int NJ>
OMNIRT_AVX512_BF16 [[gnu::always_inline]] inline void accumulate_values_bf16(
    float* const (&accumulators)[NJ], const float* const (&weights)[NJ],
    const float (&corrections)[NJ], const c10::BFloat16* values, std::int64_t slot_width,
    std::int64_t count) {
    __m512 acc[NJ][kVectors];
    alignas(32) std::uint32_t pairs[NJ][8];
#pragma GCC unroll 2
    for (int j = 0; j < NJ; ++j) {
        const __m512 correction = _mm512_set1_ps(corrections[j]);
#pragma GCC unroll 8
        for (int c = 0; c < kVectors; ++c) {
            acc[j][c] = _mm512_mul_ps(_mm512_loadu_ps(accumulators[j] + 16 * c), correction);
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(pairs[j]),
                           (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(weights[j])));
    }
    std::int64_t slot = 0;
    for (; slot + 2 <= count; slot += 2) {
        const c10::BFloat16* row = values + slot * slot_width;
        values_pair_step(acc, pairs, row, row + slot_width, slot / 2);
    }
    if (slot < count) values_pair_step(acc, pairs, values + slot * slot_width, nullptr, slot / 2);
#pragma GCC unroll 2
    for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 8
        for (int c = 0; c < kVectors; ++c) _mm512_storeu_ps(accumulators[j] + 16 * c, acc[j][c]);
    }
}

constexpr std::int64_t kBlock16 = 16;

OMNIRT_AVX512_BF16 void decode_row_bf16(const SequenceInput& sequence, std::int64_t position,
                                        const DecodeShape& shape, const c10::BFloat16* query,
                                        const c10::BFloat16* keys, const c10::BFloat16* values,
                                        double scale, c10::BFloat16* output,
                                        std::vector<float>& scratch) {
    const std::int64_t heads = shape.heads;
    const std::int64_t group = heads / shape.kv_heads;
    const std::int64_t slot_width = shape.kv_heads * kDim;
    const std::int64_t block_stride = kBlock16 * slot_width;
    const std::int64_t kv_begin = shape.kv_begin;
    const std::int64_t kv_end = shape.kv_end;
    const std::int64_t h_begin = kv_begin * group;
    const std::int64_t h_end = kv_end * group;
    // Scratch: accumulators [heads * 128] (dims permuted, see value_index), weights [heads * 16],
    // maxima, normalizers and corrections [heads].
    scratch.resize(static_cast<std::size_t>(heads * kDim + heads * kBlock16 + 3 * heads));
    float* accumulators = scratch.data();
    float* weights = accumulators + heads * kDim;
    float* maxima = weights + heads * kBlock16;
    float* normalizers = maxima + heads;
    float* corrections = normalizers + heads;
    std::fill(accumulators + h_begin * kDim, accumulators + h_end * kDim, 0.0f);
    std::fill(maxima + h_begin, maxima + h_end, -std::numeric_limits<float>::infinity());
    std::fill(normalizers + h_begin, normalizers + h_end, 0.0f);
    const __m512 scale_v = _mm512_set1_ps(static_cast<float>(scale));
    const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());

    const std::int64_t length = position + 1;
    for (std::int64_t first = 0; first < length; first += kBlock16) {
        const std::int64_t block = sequence.block_table[static_cast<std::size_t>(first / kBlock16)];
        const std::int64_t count = std::min(kBlock16, length - first);
        // Lanes of positions past the sequence: their scores are computed from whatever the
        // cache holds there (inside the block) and then masked out; no value row is read.
        const auto valid = static_cast<__mmask16>((1u << count) - 1);
        const std::int64_t next_block =
            first + kBlock16 < length
                ? sequence.block_table[static_cast<std::size_t>(first / kBlock16 + 1)]
                : -1;
        for (std::int64_t g = kv_begin; g < kv_end; ++g) {
            const std::int64_t h0 = g * group;
            const c10::BFloat16* k = keys + block * block_stride + g * kDim;
            const c10::BFloat16* v = values + block * block_stride + g * kDim;
            if (next_block >= 0) {
                // This kv head's rows of the next block, a block's work ahead (into L2; into
                // L1 measured slower): with the arithmetic this lean the kernel otherwise
                // waits on the scattered 256-byte rows.
                const std::int64_t offset = next_block * block_stride + g * kDim;
                for (std::int64_t slot = 0; slot < kBlock16; ++slot) {
                    const std::int64_t row = offset + slot * slot_width;
#pragma GCC unroll 4
                    for (int line = 0; line < 4; ++line) {
                        _mm_prefetch(reinterpret_cast<const char*>(keys + row + 32 * line),
                                     _MM_HINT_T1);
                        _mm_prefetch(reinterpret_cast<const char*>(values + row + 32 * line),
                                     _MM_HINT_T1);
                    }
                }
            }
            for (std::int64_t h = h0; h < h0 + group; ++h) {
                const c10::BFloat16* qh = query + h * kDim;
                __m512bh qv[4];
#pragma GCC unroll 4
                for (int c = 0; c < 4; ++c) qv[c] = (__m512bh)_mm512_loadu_si512(qh + 32 * c);
                __m512 dots[kBlock16];
#pragma GCC unroll 16
                for (int slot = 0; slot < kBlock16; ++slot) {
                    const c10::BFloat16* row = k + slot * slot_width;
                    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 4
                    for (int c = 0; c < 4; ++c) {
                        sum = _mm512_dpbf16_ps(sum, qv[c],
                                               (__m512bh)_mm512_loadu_si512(row + 32 * c));
                    }
                    dots[slot] = sum;
                }
                const __m512 s = _mm512_mask_mov_ps(
                    minus_inf, valid, _mm512_mul_ps(detail::sum_lanes16(dots), scale_v));
                // Online softmax: new maximum, correction of the running sums, weights.
                const float new_max = std::max(maxima[h], _mm512_reduce_max_ps(s));
                const float correction = std::exp(maxima[h] - new_max);  // 0 at the start
                maxima[h] = new_max;
                const __m512 p = _mm512_maskz_mov_ps(
                    valid, exp_nonpositive(_mm512_sub_ps(s, _mm512_set1_ps(new_max))));
                _mm512_storeu_ps(weights + h * kBlock16, p);
                normalizers[h] = normalizers[h] * correction + _mm512_reduce_add_ps(p);
                corrections[h] = correction;
            }
            // Weighted values, two heads at a time (their accumulators fit the registers).
            std::int64_t h = h0;
            for (; h + 2 <= h0 + group; h += 2) {
                float* const acc[2] = {accumulators + h * kDim, accumulators + (h + 1) * kDim};
                const float* const w[2] = {weights + h * kBlock16, weights + (h + 1) * kBlock16};
                const float c[2] = {corrections[h], corrections[h + 1]};
                accumulate_values_bf16<2>(acc, w, c, v, slot_width, count);
            }
            if (h < h0 + group) {
                float* const acc[1] = {accumulators + h * kDim};
                const float* const w[1] = {weights + h * kBlock16};
                const float c[1] = {corrections[h]};
                accumulate_values_bf16<1>(acc, w, c, v, slot_width, count);
            }
        }
    }
    for (std::int64_t h = h_begin; h < h_end; ++h) {
        const float inverse = 1.0f / normalizers[h];
        const float* acc = accumulators + h * kDim;
        for (std::int64_t d = 0; d < kDim; ++d) {
            output[h * kDim + d] = static_cast<c10::BFloat16>(acc[value_index(d)] * inverse);
        }
    }
}

#endif  // OMNIRT_HAVE_DECODE_KERNEL

}  // namespace

bool decode_kernel_applies(const DecodeShape& shape) {
#if OMNIRT_HAVE_DECODE_KERNEL
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    return avx512 && shape.head_dim == kDim && shape.kv_heads > 0 &&
           shape.heads % shape.kv_heads == 0 && 0 <= shape.kv_begin &&
           shape.kv_begin < shape.kv_end && shape.kv_end <= shape.kv_heads;
#else
    (void)shape;
    return false;
#endif
}

bool bfloat16_decode_kernel_applies(const DecodeShape& shape) {
#if OMNIRT_HAVE_DECODE_KERNEL
    static const bool bf16 =
        __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
    return bf16 && shape.block_size == kBlock16 && decode_kernel_applies(shape);
#else
    (void)shape;
    return false;
#endif
}

void attend_decode(const SequenceInput& sequence, std::int64_t position, const DecodeShape& shape,
                   const float* query, const float* keys, const float* values, double scale,
                   float* output, std::vector<float>& scratch) {
#if OMNIRT_HAVE_DECODE_KERNEL
    decode_row(sequence, position, shape, query, keys, values, scale, output, scratch);
#endif
}

void attend_decode(const SequenceInput& sequence, std::int64_t position, const DecodeShape& shape,
                   const c10::BFloat16* query, const c10::BFloat16* keys,
                   const c10::BFloat16* values, double scale, c10::BFloat16* output,
                   std::vector<float>& scratch) {
#if OMNIRT_HAVE_DECODE_KERNEL
    if (bfloat16_decode_kernel_applies(shape)) {
        decode_row_bf16(sequence, position, shape, query, keys, values, scale, output, scratch);
        return;
    }
    decode_row(sequence, position, shape, query, keys, values, scale, output, scratch);
#endif
}

}  // namespace omnirt::engine::detail

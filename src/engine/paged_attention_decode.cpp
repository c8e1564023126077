#include "engine/paged_attention_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define OMNIRT_HAVE_DECODE_KERNEL 1
#define OMNIRT_AVX512 __attribute__((target("avx512f")))
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
    for (std::int64_t i = 0; i < heads * kDim; ++i) {
        q[i] = static_cast<float>(query[i]) * scale_f;
        accumulators[i] = 0.0f;
    }
    for (std::int64_t h = 0; h < heads; ++h) {
        maxima[h] = -std::numeric_limits<float>::infinity();
        normalizers[h] = 0.0f;
    }

    const std::int64_t length = position + 1;
    for (std::int64_t first = 0; first < length; first += block_size) {
        const std::int64_t block =
            sequence.block_table[static_cast<std::size_t>(first / block_size)];
        const std::int64_t count = std::min(block_size, length - first);
        for (std::int64_t g = 0; g < shape.kv_heads; ++g) {
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
    for (std::int64_t h = 0; h < heads; ++h) {
        const float inverse = 1.0f / normalizers[h];
        for (std::int64_t i = 0; i < kDim; ++i) {
            output[h * kDim + i] = static_cast<T>(accumulators[h * kDim + i] * inverse);
        }
    }
}

#endif  // OMNIRT_HAVE_DECODE_KERNEL

}  // namespace

bool decode_kernel_applies(const DecodeShape& shape) {
#if OMNIRT_HAVE_DECODE_KERNEL
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    return avx512 && shape.head_dim == kDim && shape.kv_heads > 0 &&
           shape.heads % shape.kv_heads == 0;
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
    decode_row(sequence, position, shape, query, keys, values, scale, output, scratch);
#endif
}

}  // namespace omnirt::engine::detail

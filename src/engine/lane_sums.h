#pragma once
// Internal to the AVX-512 kernels: horizontal sums of 16 vectors at once.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <cstdint>

namespace omnirt::engine::detail {

// One vector of the 16 lane sums of s[0..15]: element i is the sum of s[i]'s lanes. A
// transposing tree: 45 shuffles and adds for 16 sums instead of a reduction per vector. Each
// sum pairs the lanes as GCC's _mm512_reduce_add_ps does (256-bit halves, 128-bit halves,
// then (x0 + x2) + (x1 + x3)), so the results are bit for bit the same.
[[gnu::always_inline, gnu::target("avx512f")]] inline __m512 sum_lanes16(const __m512 (&s)[16]) {
    __m512 a[8];  // 128-bit lanes 0-1: partials of s[2i], lanes 2-3: of s[2i + 1]
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
        a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xEE));
    }
    __m512 b[4];  // 128-bit lane l: four partials of s[4i + l]
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
    }
    // Lane l: two partials each of s[l], s[l + 4] (e0) and s[l + 8], s[l + 12] (e1).
    const __m512 e0 = _mm512_add_ps(_mm512_unpacklo_ps(b[0], b[1]), _mm512_unpackhi_ps(b[0], b[1]));
    const __m512 e1 = _mm512_add_ps(_mm512_unpacklo_ps(b[2], b[3]), _mm512_unpackhi_ps(b[2], b[3]));
    // Element 4l + m: the sum of s[l + 4m]; the permutation puts element i at i.
    const __m512 sums =
        _mm512_add_ps(_mm512_shuffle_ps(e0, e1, 0x44), _mm512_shuffle_ps(e0, e1, 0xEE));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, sums);
}

// Sums per group of the streaming kernels: one sum_lanes16.
inline constexpr int kGroupSums = 16;

// y[m * y_stride + r] = the lanes of sums[m][r] added, for R input rows and the `count` (<=
// kGroupSums) weight rows of a streamed group: a whole group's 16 sums reduced together, a
// partial one's each as _mm512_reduce_add_ps does (the same bits either way).
template <int R>
[[gnu::always_inline, gnu::target("avx512f")]] inline void store_group_sums(
    __m512 (&sums)[R][kGroupSums], int count, float* y, std::int64_t y_stride) {
    for (int m = 0; m < R; ++m) {
        float* out = y + m * y_stride;
        if (count == kGroupSums) {
            _mm512_storeu_ps(out, sum_lanes16(sums[m]));
        } else {
            for (int r = 0; r < count; ++r) out[r] = _mm512_reduce_add_ps(sums[m][r]);
        }
    }
}

}  // namespace omnirt::engine::detail

#endif

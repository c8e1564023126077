// The layer's kernels (kernels.h). Function multiversioning: the loader picks the AVX2 + FMA
// clone where the CPU has it, the baseline (two SSE halves per vector) elsewhere.
#include "vad/kernels.h"

#include <cstring>

#include "core/error.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OMNIRT_VAD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define OMNIRT_VAD_CLONES
#endif

namespace omnirt::vad {
namespace {

using Float8 = float __attribute__((vector_size(kSimdWidth * sizeof(float))));

[[gnu::always_inline]] inline Float8 load8(const float* source) {
    Float8 v;
    std::memcpy(&v, source, sizeof v);
    return v;
}

[[gnu::always_inline]] inline float horizontal_sum(Float8 v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// Count is a template argument so that the accumulators live in registers. Rows go in blocks
// so that even one vector (count 1: the LSTM) has several independent FMA chains in flight
// rather than one chain bound by the FMA latency.
template <int Count>
[[gnu::always_inline]] inline void multiply_rows(const PaddedMatrix& m, const float* x,
                                                 int x_stride, float* y, int y_stride) {
    constexpr int kBlock = Count >= 3 ? 2 : 4;
    int r = 0;
    for (; r + kBlock <= m.rows; r += kBlock) {
        const float* row = m.values.data() + static_cast<std::size_t>(r) * m.stride;
        Float8 acc[kBlock][Count] = {};
        for (int c = 0; c < m.stride; c += kSimdWidth) {
            Float8 v[Count];
            for (int j = 0; j < Count; ++j) v[j] = load8(x + j * x_stride + c);
            for (int b = 0; b < kBlock; ++b) {
                const Float8 w = load8(row + b * m.stride + c);
                for (int j = 0; j < Count; ++j) acc[b][j] += w * v[j];
            }
        }
        for (int b = 0; b < kBlock; ++b) {
            for (int j = 0; j < Count; ++j) {
                y[j * y_stride + r + b] = m.bias[r + b] + horizontal_sum(acc[b][j]);
            }
        }
    }
    for (; r < m.rows; ++r) {
        const float* row = m.values.data() + static_cast<std::size_t>(r) * m.stride;
        Float8 acc[Count] = {};
        for (int c = 0; c < m.stride; c += kSimdWidth) {
            const Float8 w = load8(row + c);
            for (int j = 0; j < Count; ++j) acc[j] += w * load8(x + j * x_stride + c);
        }
        for (int j = 0; j < Count; ++j) y[j * y_stride + r] = m.bias[r] + horizontal_sum(acc[j]);
    }
}

}  // namespace

OMNIRT_VAD_CLONES void multiply(const PaddedMatrix& m, const float* x, int count, int x_stride,
                                float* y, int y_stride) {
    switch (count) {
        case 1:
            return multiply_rows<1>(m, x, x_stride, y, y_stride);
        case 2:
            return multiply_rows<2>(m, x, x_stride, y, y_stride);
        case 3:
            return multiply_rows<3>(m, x, x_stride, y, y_stride);
        case 4:
            return multiply_rows<4>(m, x, x_stride, y, y_stride);
        default:
            OMNI_CHECK(false, "vad multiply: count must be 1..4");
    }
}

OMNIRT_VAD_CLONES float dot(const float* a, const float* b, int count) {
    Float8 even = {};
    Float8 odd = {};
    int i = 0;
    for (; i + 2 * kSimdWidth <= count; i += 2 * kSimdWidth) {
        even += load8(a + i) * load8(b + i);
        odd += load8(a + i + kSimdWidth) * load8(b + i + kSimdWidth);
    }
    if (i < count) even += load8(a + i) * load8(b + i);
    return horizontal_sum(even + odd);
}

}  // namespace omnirt::vad

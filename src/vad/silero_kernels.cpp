// The one kernel of the Silero network: a matrix times up to four vectors. GCC vector types
// (no intrinsics, no -march flag) and function multiversioning: the loader picks the AVX2 + FMA
// clone where the CPU has it, the baseline (two SSE halves per vector) elsewhere.
#include <cstring>

#include "core/error.h"
#include "vad/silero_weights.h"

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

// Count is a template argument so that the accumulators live in registers.
template <int Count>
[[gnu::always_inline]] inline void multiply_rows(const PaddedMatrix& m, const float* x,
                                                 int x_stride, float* y, int y_stride) {
    for (int r = 0; r < m.rows; ++r) {
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

}  // namespace omnirt::vad

#pragma once
// Private to omnirt_vad: the two loops the layer's time goes into, written with GCC vector types
// (no intrinsics, no -march flag) and compiled twice (kernels.cpp): for AVX2 + FMA, picked at
// load time where the CPU has it, and for the baseline x86-64.
#include <vector>

namespace omnirt::vad {

inline constexpr int kSimdWidth = 8;  // floats per kernel vector; lengths are padded to a multiple

// A weight matrix [rows, cols] stored with rows padded to `stride` floats (zeros past cols), so
// that the kernel runs whole vectors; the input it multiplies must be zero past cols as well.
struct PaddedMatrix {
    int rows = 0;
    int cols = 0;
    int stride = 0;
    std::vector<float> values;  // rows * stride
    std::vector<float> bias;    // rows (zeros where the layer has none)
};

// y[j * y_stride + r] = bias[r] + dot(row r of m, x + j * x_stride), r < m.rows, j < count;
// each x vector must hold m.stride floats, zeros past m.cols. count 1..4.
void multiply(const PaddedMatrix& m, const float* x, int count, int x_stride, float* y,
              int y_stride);

// sum of a[i] * b[i], i < count; count a multiple of kSimdWidth.
[[nodiscard]] float dot(const float* a, const float* b, int count);

}  // namespace omnirt::vad

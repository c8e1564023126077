#pragma once
// Private to the codec (codec_layers.cpp): Snake, y = x + sin^2(a x) / (a + 1e-9), over rows of
// samples in one pass: sin^2 from a polynomial of GCC vector types (no libm call per sample),
// compiled for AVX2 + FMA and for the baseline (engine/cpu_vector.h), rows split over ATen's
// intra-op threads. float32 values, or bfloat16 ones widened, computed in float32 and rounded
// once.
//
// Thread safety: pure functions; any thread.
#include <c10/util/BFloat16.h>

#include <cstdint>

namespace omnirt::models::s2_pro::codec {

// y[r * y_stride + t] = snake(x[r * x_stride + t]) with a = alpha[r % channels], for r < rows,
// t < length. x and y may be the same memory (in place) but must not overlap otherwise.
void snake_rows(const float* x, std::int64_t x_stride, float* y, std::int64_t y_stride,
                std::int64_t rows, std::int64_t length, const float* alpha, std::int64_t channels);
void snake_rows(const c10::BFloat16* x, std::int64_t x_stride, c10::BFloat16* y,
                std::int64_t y_stride, std::int64_t rows, std::int64_t length, const float* alpha,
                std::int64_t channels);

}  // namespace omnirt::models::s2_pro::codec

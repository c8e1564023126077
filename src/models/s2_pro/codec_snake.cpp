#include "models/s2_pro/codec_snake.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "engine/cpu_vector.h"

namespace omnirt::models::s2_pro::codec {
namespace {

using engine::cpu::Float8;
using engine::cpu::load8;
using engine::cpu::store8;
using Int8 = std::int32_t __attribute__((vector_size(32)));

// sin^2(y): y = k pi / 2 + r with k an integer (Cody-Waite, pi / 2 in three parts) and
// |r| <= pi / 4; sin^2(y) is sin^2(r) for even k and cos^2(r) for odd k (the sign drops out),
// each from Cephes' single-precision polynomials (about 1 ulp on that range). k is exact for
// |y| < 2^22.
OMNIRT_INLINE Float8 sin_squared(Float8 y) {
    constexpr float kTwoOverPi = 0.636619772367581343f;
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to even
    const Float8 k = (y * kTwoOverPi + kRound) - kRound;
    const Float8 r =
        ((y - k * 1.5703125f) - k * 4.837512969970703125e-4f) - k * 7.54978995489188216e-8f;
    const Float8 z = r * r;
    const Float8 sin =
        r + r * z * ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f);
    const Float8 cos =
        1.0f - 0.5f * z +
        z * z * ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f);
    const Int8 odd = __builtin_convertvector(k, Int8) & 1;
    return odd != 0 ? cos * cos : sin * sin;
}

OMNIRT_INLINE Float8 snake8(Float8 x, float alpha, float inverse) {
    return x + inverse * sin_squared(alpha * x);
}

template <typename T>
OMNIRT_INLINE void snake_row(const T* x, T* y, std::int64_t length, float alpha) {
    const float inverse = 1.0f / (alpha + 1e-9f);
    std::int64_t t = 0;
    for (; t + 8 <= length; t += 8) store8(y + t, snake8(load8(x + t), alpha, inverse));
    if (t < length) {  // the tail through a zero-padded vector
        T in[8] = {};
        T out[8];
        std::copy(x + t, x + length, in);
        store8(out, snake8(load8(in), alpha, inverse));
        std::copy(out, out + (length - t), y + t);
    }
}

OMNIRT_KERNEL_CLONES void snake_row_float(const float* x, float* y, std::int64_t length,
                                          float alpha) {
    snake_row(x, y, length, alpha);
}

OMNIRT_KERNEL_CLONES void snake_row_bfloat16(const c10::BFloat16* x, c10::BFloat16* y,
                                             std::int64_t length, float alpha) {
    snake_row(x, y, length, alpha);
}

template <typename T, typename Row>
void snake_all(const T* x, std::int64_t x_stride, T* y, std::int64_t y_stride, std::int64_t rows,
               std::int64_t length, const float* alpha, std::int64_t channels, Row row) {
    // Rows of a few thousand samples each: enough work per task for ATen's pool.
    const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(length, 1));
    at::parallel_for(0, rows, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            row(x + r * x_stride, y + r * y_stride, length, alpha[r % channels]);
        }
    });
}

}  // namespace

void snake_rows(const float* x, std::int64_t x_stride, float* y, std::int64_t y_stride,
                std::int64_t rows, std::int64_t length, const float* alpha, std::int64_t channels) {
    snake_all(x, x_stride, y, y_stride, rows, length, alpha, channels, snake_row_float);
}

void snake_rows(const c10::BFloat16* x, std::int64_t x_stride, c10::BFloat16* y,
                std::int64_t y_stride, std::int64_t rows, std::int64_t length, const float* alpha,
                std::int64_t channels) {
    snake_all(x, x_stride, y, y_stride, rows, length, alpha, channels, snake_row_bfloat16);
}

}  // namespace omnirt::models::s2_pro::codec

// The 400-point real FFT: a 200-point complex FFT of z[n] = x[2n] + i x[2n+1] (mixed-radix
// Stockham, radices 5, 5, 4, 2, so the output lands in natural order without a bit reversal),
// then the standard even/odd split into the 201 bins of the real transform. Each element is a
// FloatLanes vector holding that element for kFftLanes frames.
#include "media/real_fft.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>

namespace omnirt::media::detail {
namespace {

constexpr int kComplexSize = kRealFftSize / 2;  // 200
using V = FloatLanes;

struct Complex {
    V re;
    V im;
};

[[gnu::always_inline]] inline Complex rotate(Complex a, float w_re, float w_im) {
    return {a.re * w_re - a.im * w_im, a.re * w_im + a.im * w_re};
}

// Forward radix-5 DFT of a[0..4] with the 2 x 2 symmetric decomposition (10 real multiplies
// per lane instead of 40).
[[gnu::always_inline]] inline void dft5(const Complex* a, Complex* y) {
    const double pi = std::numbers::pi;
    const auto c1 = static_cast<float>(std::cos(2 * pi / 5));
    const auto c2 = static_cast<float>(std::cos(4 * pi / 5));
    const auto s1 = static_cast<float>(std::sin(2 * pi / 5));
    const auto s2 = static_cast<float>(std::sin(4 * pi / 5));
    const Complex t1{a[1].re + a[4].re, a[1].im + a[4].im};
    const Complex t2{a[2].re + a[3].re, a[2].im + a[3].im};
    const Complex t3{a[1].re - a[4].re, a[1].im - a[4].im};
    const Complex t4{a[2].re - a[3].re, a[2].im - a[3].im};
    y[0] = {a[0].re + t1.re + t2.re, a[0].im + t1.im + t2.im};
    const Complex m1{a[0].re + c1 * t1.re + c2 * t2.re, a[0].im + c1 * t1.im + c2 * t2.im};
    const Complex m2{a[0].re + c2 * t1.re + c1 * t2.re, a[0].im + c2 * t1.im + c1 * t2.im};
    const Complex n1{s1 * t3.re + s2 * t4.re, s1 * t3.im + s2 * t4.im};
    const Complex n2{s2 * t3.re - s1 * t4.re, s2 * t3.im - s1 * t4.im};
    // -i (x + iy) = y - ix
    y[1] = {m1.re + n1.im, m1.im - n1.re};
    y[4] = {m1.re - n1.im, m1.im + n1.re};
    y[2] = {m2.re + n2.im, m2.im - n2.re};
    y[3] = {m2.re - n2.im, m2.im + n2.re};
}

[[gnu::always_inline]] inline void dft4(const Complex* a, Complex* y) {
    const Complex s02{a[0].re + a[2].re, a[0].im + a[2].im};
    const Complex d02{a[0].re - a[2].re, a[0].im - a[2].im};
    const Complex s13{a[1].re + a[3].re, a[1].im + a[3].im};
    const Complex d13{a[1].re - a[3].re, a[1].im - a[3].im};
    y[0] = {s02.re + s13.re, s02.im + s13.im};
    y[2] = {s02.re - s13.re, s02.im - s13.im};
    // w_4 = -i: y1 = d02 - i d13, y3 = d02 + i d13.
    y[1] = {d02.re + d13.im, d02.im - d13.re};
    y[3] = {d02.re - d13.im, d02.im + d13.re};
}

[[gnu::always_inline]] inline void dft2(const Complex* a, Complex* y) {
    y[0] = {a[0].re + a[1].re, a[0].im + a[1].im};
    y[1] = {a[0].re - a[1].re, a[0].im - a[1].im};
}

// Everything below is inlined into compute_lanes so that each of its clones gets its own
// instruction set (and no vector crosses a call between clones of different ABIs).
// One radix-p Stockham step: y[r + s(pq + k)] = w_n^(qk) * sum_j x[r + s(q + jm)] w_p^(jk).
template <int Radix>
[[gnu::always_inline]] inline void stockham_step(int length, int stride, const float* twiddle_re,
                                                 const float* twiddle_im, const V* __restrict x_re,
                                                 const V* __restrict x_im, V* __restrict y_re,
                                                 V* __restrict y_im) {
    const int m = length / Radix;
    for (int q = 0; q < m; ++q) {
        for (int r = 0; r < stride; ++r) {
            Complex a[Radix];
            for (int j = 0; j < Radix; ++j) {
                const int e = r + stride * (q + j * m);
                a[j] = {x_re[e], x_im[e]};
            }
            Complex y[Radix];
            if constexpr (Radix == 5) {
                dft5(a, y);
            } else if constexpr (Radix == 4) {
                dft4(a, y);
            } else {
                dft2(a, y);
            }
            for (int k = 0; k < Radix; ++k) {
                const Complex out =
                    q == 0 ? y[k]
                           : rotate(y[k], twiddle_re[q * Radix + k], twiddle_im[q * Radix + k]);
                const int e = r + stride * (Radix * q + k);
                y_re[e] = out.re;
                y_im[e] = out.im;
            }
        }
    }
}

}  // namespace

PowerSpectrum400::PowerSpectrum400(const std::vector<float>& window) : window_(window) {
    window_.resize(kRealFftSize, 0.0f);
    int length = kComplexSize;
    int stride = 1;
    for (int radix : {5, 5, 4, 2}) {
        Stage stage{
            .radix = radix, .length = length, .stride = stride, .twiddle_re = {}, .twiddle_im = {}};
        const int m = length / radix;
        stage.twiddle_re.resize(static_cast<std::size_t>(m * radix));
        stage.twiddle_im.resize(static_cast<std::size_t>(m * radix));
        for (int q = 0; q < m; ++q) {
            for (int k = 0; k < radix; ++k) {
                const double angle = -2.0 * std::numbers::pi * q * k / length;
                stage.twiddle_re[q * radix + k] = static_cast<float>(std::cos(angle));
                stage.twiddle_im[q * radix + k] = static_cast<float>(std::sin(angle));
            }
        }
        stages_.push_back(std::move(stage));
        length = m;
        stride *= radix;
    }
    split_re_.resize(kRealFftBins);
    split_im_.resize(kRealFftBins);
    for (int k = 0; k < kRealFftBins; ++k) {
        const double angle = -2.0 * std::numbers::pi * k / kRealFftSize;
        split_re_[k] = static_cast<float>(std::cos(angle));
        split_im_[k] = static_cast<float>(std::sin(angle));
    }
}

void PowerSpectrum400::compute(const std::array<const float*, kFftLanes>& frames, Scratch& scratch,
                               FloatLanes* power) const {
    compute_lanes(frames, scratch, power);
}

OMNIRT_MEDIA_SIMD_CLONES
void PowerSpectrum400::compute_lanes(const std::array<const float*, kFftLanes>& frames,
                                     Scratch& scratch, FloatLanes* power) const {
    V* x_re = scratch.re_a.data();
    V* x_im = scratch.im_a.data();
    V* y_re = scratch.re_b.data();
    V* y_im = scratch.im_b.data();
    // Window and transpose through plain float arrays: inserting single lanes into vectors
    // makes GCC spill every element through the stack.
    alignas(64) float even[kComplexSize * kFftLanes];
    alignas(64) float odd[kComplexSize * kFftLanes];
    for (int l = 0; l < kFftLanes; ++l) {
        const float* frame = frames[l];
        for (int n = 0; n < kComplexSize; ++n) {
            even[n * kFftLanes + l] = frame[2 * n] * window_[2 * n];
            odd[n * kFftLanes + l] = frame[2 * n + 1] * window_[2 * n + 1];
        }
    }
    std::memcpy(x_re, even, sizeof(even));
    std::memcpy(x_im, odd, sizeof(odd));
    for (const Stage& stage : stages_) {
        const float* tw_re = stage.twiddle_re.data();
        const float* tw_im = stage.twiddle_im.data();
        switch (stage.radix) {
            case 2:
                stockham_step<2>(stage.length, stage.stride, tw_re, tw_im, x_re, x_im, y_re, y_im);
                break;
            case 4:
                stockham_step<4>(stage.length, stage.stride, tw_re, tw_im, x_re, x_im, y_re, y_im);
                break;
            default:
                stockham_step<5>(stage.length, stage.stride, tw_re, tw_im, x_re, x_im, y_re, y_im);
                break;
        }
        std::swap(x_re, y_re);
        std::swap(x_im, y_im);
    }
    // Real split: X[k] = E[k] + W^k O[k], E = (Z[k] + conj Z[N-k]) / 2,
    // O = (Z[k] - conj Z[N-k]) / 2i, with Z[N] = Z[0].
    for (int k = 0; k < kRealFftBins; ++k) {
        const int a = k % kComplexSize;
        const int b = (kComplexSize - k) % kComplexSize;
        const float w_re = split_re_[k];
        const float w_im = split_im_[k];
        const V even_re = 0.5f * (x_re[a] + x_re[b]);
        const V even_im = 0.5f * (x_im[a] - x_im[b]);
        const V odd_re = 0.5f * (x_im[a] + x_im[b]);
        const V odd_im = -0.5f * (x_re[a] - x_re[b]);
        const V out_re = even_re + w_re * odd_re - w_im * odd_im;
        const V out_im = even_im + w_re * odd_im + w_im * odd_re;
        power[k] = out_re * out_re + out_im * out_im;
    }
}

}  // namespace omnirt::media::detail

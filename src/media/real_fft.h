#pragma once
// Private to omnirt_media: the 400-point real FFT behind the Whisper front end, batched over
// kFftLanes frames at once (one GCC vector per element) so that every butterfly is SIMD across
// frames without intrinsics or a -march flag.
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

namespace omnirt::media::detail {

inline constexpr int kFftLanes = 8;
inline constexpr int kRealFftSize = 400;
inline constexpr int kRealFftBins = kRealFftSize / 2 + 1;  // 201

// Functions marked with this are compiled twice, for AVX2 and for the baseline, and the loader
// picks one for the CPU it runs on (GCC function multiversioning): portable binaries that still
// use the wide registers.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OMNIRT_MEDIA_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define OMNIRT_MEDIA_SIMD_CLONES
#endif

// kFftLanes floats as one value (GCC/Clang vector extension; SSE2 splits it in two halves).
using FloatLanes = float __attribute__((vector_size(kFftLanes * sizeof(float))));

// Power spectra |X[k]|^2, k = 0..200, of kFftLanes real frames of 400 samples each, multiplied
// by a window first. Immutable after construction: share one instance between threads; each
// call works in the caller's scratch.
class PowerSpectrum400 {
  public:
    explicit PowerSpectrum400(const std::vector<float>& window);

    // Work arrays of one call (25 KiB): allocate with make_unique, one per thread.
    struct Scratch {
        alignas(64) std::array<FloatLanes, kRealFftSize / 2> re_a, im_a, re_b, im_b;
    };

    // frames: kFftLanes pointers to 400 samples each. power: 201 entries, one lane per frame.
    void compute(const std::array<const float*, kFftLanes>& frames, Scratch& scratch,
                 FloatLanes* power) const;

  private:
    void compute_lanes(const std::array<const float*, kFftLanes>& frames, Scratch& scratch,
                       FloatLanes* power) const;

    struct Stage {
        int radix = 0;
        int length = 0;                             // the sub-transform length n at this stage
        int stride = 0;                             // s
        std::vector<float> twiddle_re, twiddle_im;  // [q * radix + k] = w_n^(q k)
    };
    std::vector<float> window_;
    std::vector<Stage> stages_;
    std::vector<float> split_re_, split_im_;  // e^(-2 pi i k / 400), k = 0..200
};

// log10 of each lane (positive, normal inputs), to about 1e-7 relative: frexp-style split and
// the atanh series of the mantissa. Vectorises, unlike libm's log10f.
[[gnu::always_inline]] inline FloatLanes log10_lanes(FloatLanes x) {
    using Bits = std::int32_t __attribute__((vector_size(kFftLanes * sizeof(std::int32_t))));
    Bits bits;
    std::memcpy(&bits, &x, sizeof(bits));
    // x = 2^e * m with m in [sqrt(0.5), sqrt(2)): shift the exponent split point by
    // subtracting the bits of sqrt(0.5) (0x3f3504f3) before extracting e.
    const Bits offset = bits - 0x3f3504f3;
    const Bits exponent = offset >> 23;
    const Bits mantissa_bits = (offset & 0x007fffff) + 0x3f3504f3;
    FloatLanes m;
    std::memcpy(&m, &mantissa_bits, sizeof(m));
    FloatLanes e = __builtin_convertvector(exponent, FloatLanes);
    // ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: the series to s^9 leaves
    // an error under 4e-10.
    const FloatLanes s = (m - 1.0f) / (m + 1.0f);
    const FloatLanes s2 = s * s;
    const FloatLanes series =
        s * (2.0f + s2 * (2.0f / 3 + s2 * (2.0f / 5 + s2 * (2.0f / 7 + s2 * (2.0f / 9)))));
    constexpr float kLog10Of2 = 0.30102999566398120f;
    constexpr float kLog10OfE = 0.43429448190325182f;
    return e * kLog10Of2 + series * kLog10OfE;
}

}  // namespace omnirt::media::detail

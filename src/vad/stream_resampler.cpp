#include "vad/stream_resampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "vad/kernels.h"

namespace omnirt::vad {
namespace {

constexpr int kMaxUp = 640;
// Silero looks at the whole 0..8 kHz band: a cutoff at 92% of 8 kHz moved a speech probability
// at the end of a word from 0.63 to 0.42 (24 kHz input against the same audio at 16 kHz), 98%
// with 48 lobes keeps it within 0.01. 152 taps per output sample from 24 kHz: about a tenth
// of the network's cost (docs/benchmarks.md).
constexpr double kZeroCrossings = 48;  // sinc lobes on each side at the cutoff frequency
constexpr double kRolloff = 0.98;      // cutoff as a fraction of the lower Nyquist frequency
constexpr double kKaiserBeta = 10;     // about 100 dB stop band

double bessel_i0(double x) {
    double sum = 1.0;
    double term = 1.0;
    for (int k = 1; k < 50; ++k) {
        term *= (x / (2.0 * k)) * (x / (2.0 * k));
        sum += term;
        if (term < 1e-12 * sum) break;
    }
    return sum;
}

}  // namespace

Result<StreamResampler> StreamResampler::create(int in_rate, int out_rate) {
    if (in_rate < 1000 || in_rate > 384000 || out_rate < 1000 || out_rate > 384000) {
        return fail(
            ErrorCode::invalid_argument,
            "vad: input sample rate " + std::to_string(in_rate) + " Hz is outside 1000..384000");
    }
    const int common = std::gcd(in_rate, out_rate);
    StreamResampler resampler;
    resampler.up_ = out_rate / common;
    resampler.down_ = in_rate / common;
    if (resampler.up_ > kMaxUp) {
        return fail(ErrorCode::invalid_argument,
                    "vad: cannot resample " + std::to_string(in_rate) + " Hz to " +
                        std::to_string(out_rate) + " Hz (the ratio " +
                        std::to_string(resampler.up_) + "/" + std::to_string(resampler.down_) +
                        " has too many phases)");
    }
    if (resampler.up_ == resampler.down_) return resampler;  // same rate: a copy

    // Cutoff in cycles per input sample: below both Nyquist frequencies.
    const double scale =
        kRolloff * std::min(1.0, static_cast<double>(resampler.up_) / resampler.down_);
    const double half_width = kZeroCrossings / scale;  // input samples
    // 2H taps, a multiple of the kernel's vector width (the extra ones are zero).
    const int half_taps = (static_cast<int>(std::ceil(half_width)) + kSimdWidth / 2 - 1) /
                          (kSimdWidth / 2) * (kSimdWidth / 2);
    resampler.half_taps_ = half_taps;
    resampler.taps_.resize(static_cast<std::size_t>(resampler.up_) * 2 * half_taps);
    const double i0_beta = bessel_i0(kKaiserBeta);
    for (int phase = 0; phase < resampler.up_; ++phase) {
        float* taps = resampler.taps_.data() + static_cast<std::size_t>(phase) * 2 * half_taps;
        double sum = 0;
        std::vector<double> values(2 * half_taps);
        for (int j = 0; j < 2 * half_taps; ++j) {
            // Distance from the output time to input sample floor(t) - H + 1 + j.
            const double tau = static_cast<double>(phase) / resampler.up_ + half_taps - 1 - j;
            double value = 0;
            if (std::abs(tau) < half_width) {
                const double x = M_PI * scale * tau;
                const double sinc = x == 0 ? 1.0 : std::sin(x) / x;
                const double r = tau / half_width;
                value = sinc * bessel_i0(kKaiserBeta * std::sqrt(1 - r * r)) / i0_beta;
            }
            values[j] = value;
            sum += value;
        }
        // Unit gain at DC for every phase.
        for (int j = 0; j < 2 * half_taps; ++j) taps[j] = static_cast<float>(values[j] / sum);
    }
    resampler.reset();
    return resampler;
}

void StreamResampler::reset() {
    // H - 1 zeros before input sample 0: the filter's left half at the start of the stream.
    history_.assign(static_cast<std::size_t>(std::max(half_taps_ - 1, 0)), 0.0f);
    history_start_ = -static_cast<std::int64_t>(history_.size());
    next_output_ = 0;
}

void StreamResampler::push(std::span<const float> in, std::vector<float>& out) {
    if (up_ == down_) {
        out.insert(out.end(), in.begin(), in.end());
        return;
    }
    history_.insert(history_.end(), in.begin(), in.end());
    const std::int64_t available_end = history_start_ + static_cast<std::int64_t>(history_.size());
    const int width = 2 * half_taps_;
    for (;;) {
        const std::int64_t position = next_output_ * down_;
        const std::int64_t base = position / up_;  // floor(t): t = n * M / L >= 0
        const int phase = static_cast<int>(position % up_);
        const std::int64_t first = base - half_taps_ + 1;
        if (first + width > available_end) break;
        const float* x = history_.data() + (first - history_start_);
        const float* taps = taps_.data() + static_cast<std::size_t>(phase) * width;
        out.push_back(dot(taps, x, width));
        ++next_output_;
    }
    // Keep what the next output's filter still reaches.
    const std::int64_t keep_from = (next_output_ * down_) / up_ - half_taps_ + 1;
    if (keep_from > history_start_) {
        history_.erase(history_.begin(), history_.begin() + (keep_from - history_start_));
        history_start_ = keep_from;
    }
}

}  // namespace omnirt::vad

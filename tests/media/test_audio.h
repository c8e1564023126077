#pragma once
// Shared helpers for the media tests: test signals and similarity measures.
#include <cmath>
#include <cstddef>
#include <numbers>
#include <span>
#include <string>

#include "media/audio.h"

namespace omnirt::media::testing {

inline AudioBuffer sine(int sample_rate, double seconds, double hz = 440.0, int channels = 1,
                        float amplitude = 0.5f) {
    AudioBuffer buffer{.sample_rate = sample_rate, .channels = channels, .samples = {}};
    const auto frames = static_cast<std::size_t>(std::lround(sample_rate * seconds));
    buffer.samples.resize(frames * static_cast<std::size_t>(channels));
    for (std::size_t f = 0; f < frames; ++f) {
        const double t = static_cast<double>(f) / sample_rate;
        for (int c = 0; c < channels; ++c) {
            // Channel c is phase-shifted so that channel mix-ups show.
            buffer.samples[f * channels + c] =
                static_cast<float>(amplitude * std::sin(2.0 * std::numbers::pi * hz * t + c * 0.5));
        }
    }
    return buffer;
}

inline double rms(std::span<const float> samples) {
    double sum = 0;
    for (float x : samples) sum += double{x} * x;
    return samples.empty() ? 0.0 : std::sqrt(sum / samples.size());
}

// Best normalised cross-correlation of b against a over lags 0..max_lag (codec delay).
inline double best_correlation(std::span<const float> a, std::span<const float> b,
                               std::size_t max_lag) {
    double best = -1;
    for (std::size_t lag = 0; lag <= max_lag && lag < b.size(); ++lag) {
        const std::size_t n = std::min(a.size(), b.size() - lag);
        double ab = 0, aa = 0, bb = 0;
        for (std::size_t i = 0; i < n; ++i) {
            ab += double{a[i]} * b[i + lag];
            aa += double{a[i]} * a[i];
            bb += double{b[i + lag]} * b[i + lag];
        }
        if (aa > 0 && bb > 0) best = std::max(best, ab / std::sqrt(aa * bb));
    }
    return best;
}

inline std::span<const std::byte> as_bytes(const std::string& data) {
    return std::as_bytes(std::span<const char>(data.data(), data.size()));
}

}  // namespace omnirt::media::testing

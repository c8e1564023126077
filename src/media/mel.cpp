// whisper_log_mel: the Whisper log-mel front end (see mel.h for the exact recipe).
#include "media/mel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numbers>
#include <string>

#include "media/real_fft.h"

namespace omnirt::media {
namespace {

using detail::kFftLanes;
using detail::kRealFftBins;

constexpr float kMelFloor = 1e-10f;
constexpr float kDynamicRange = 8.0f;  // log10 units: 80 dB below the utterance's maximum

// Slaney's mel scale: linear below 1 kHz, logarithmic above.
double hertz_to_mel(double hertz) {
    constexpr double kMinLogHertz = 1000.0;
    constexpr double kMinLogMel = 15.0;
    const double log_step = 27.0 / std::log(6.4);
    if (hertz < kMinLogHertz) return 3.0 * hertz / 200.0;
    return kMinLogMel + std::log(hertz / kMinLogHertz) * log_step;
}

double mel_to_hertz(double mel) {
    constexpr double kMinLogHertz = 1000.0;
    constexpr double kMinLogMel = 15.0;
    const double log_step = std::log(6.4) / 27.0;
    if (mel < kMinLogMel) return 200.0 * mel / 3.0;
    return kMinLogHertz * std::exp(log_step * (mel - kMinLogMel));
}

std::vector<double> build_mel_filters() {
    constexpr int kBins = kRealFftBins;
    constexpr int kFilters = kWhisperMelBins;
    constexpr double kMaxHertz = kWhisperSampleRate / 2.0;
    std::vector<double> fft_hertz(kBins);
    for (int b = 0; b < kBins; ++b) fft_hertz[b] = kMaxHertz * b / (kBins - 1);
    const double mel_min = hertz_to_mel(0.0);
    const double mel_max = hertz_to_mel(kMaxHertz);
    std::vector<double> edges(kFilters + 2);
    for (int i = 0; i < kFilters + 2; ++i) {
        edges[i] = mel_to_hertz(mel_min + (mel_max - mel_min) * i / (kFilters + 1));
    }
    std::vector<double> filters(static_cast<std::size_t>(kFilters) * kBins, 0.0);
    for (int m = 0; m < kFilters; ++m) {
        const double lower = edges[m], center = edges[m + 1], upper = edges[m + 2];
        const double area_norm = 2.0 / (upper - lower);  // Slaney normalisation
        for (int b = 0; b < kBins; ++b) {
            const double down = (fft_hertz[b] - lower) / (center - lower);
            const double up = (upper - fft_hertz[b]) / (upper - center);
            filters[static_cast<std::size_t>(m) * kBins + b] =
                std::max(0.0, std::min(down, up)) * area_norm;
        }
    }
    return filters;
}

// The non-zero span of each filter, as floats for the per-frame products.
struct SparseFilter {
    int first_bin = 0;
    std::vector<float> weights;
};

const std::vector<SparseFilter>& sparse_filters() {
    static const std::vector<SparseFilter> filters = [] {
        const std::vector<double>& dense = whisper_mel_filters();
        std::vector<SparseFilter> out(kWhisperMelBins);
        for (int m = 0; m < kWhisperMelBins; ++m) {
            const double* row = dense.data() + static_cast<std::size_t>(m) * kRealFftBins;
            int first = 0;
            while (first < kRealFftBins && row[first] == 0.0) ++first;
            int last = kRealFftBins;
            while (last > first && row[last - 1] == 0.0) --last;
            out[m].first_bin = first;
            for (int b = first; b < last; ++b) out[m].weights.push_back(static_cast<float>(row[b]));
        }
        return out;
    }();
    return filters;
}

const std::vector<float>& hann_window() {
    static const std::vector<float> window = [] {
        std::vector<float> w(kWhisperFftSize);
        for (int n = 0; n < kWhisperFftSize; ++n) {
            w[n] = static_cast<float>(0.5 -
                                      0.5 * std::cos(2.0 * std::numbers::pi * n / kWhisperFftSize));
        }
        return w;
    }();
    return window;
}

// numpy's "reflect" padding, repeated when the pad is longer than the signal.
std::int64_t reflect_index(std::int64_t i, std::int64_t size) {
    if (size == 1) return 0;
    const std::int64_t period = 2 * (size - 1);
    i = std::abs(i) % period;
    return i < size ? i : period - i;
}

// log10(max(mel, 1e-10)) of the kFftLanes frames in `power`, into log_mel[128]; raises
// max_lanes. Lanes past the last frame hold silence, log10(1e-10): never above the maximum.
OMNIRT_MEDIA_SIMD_CLONES
void log_mel_lanes(const detail::FloatLanes* power, const std::vector<SparseFilter>& filters,
                   detail::FloatLanes* log_mel, detail::FloatLanes* max_lanes) {
    detail::FloatLanes max_value = *max_lanes;
    for (int m = 0; m < kWhisperMelBins; ++m) {
        const SparseFilter& filter = filters[m];
        detail::FloatLanes sum{};
        const detail::FloatLanes* p = power + filter.first_bin;
        for (std::size_t b = 0; b < filter.weights.size(); ++b) sum += filter.weights[b] * p[b];
        sum = sum > kMelFloor ? sum : detail::FloatLanes{} + kMelFloor;
        const detail::FloatLanes value = detail::log10_lanes(sum);
        max_value = value > max_value ? value : max_value;
        log_mel[m] = value;
    }
    *max_lanes = max_value;
}

}  // namespace

const std::vector<double>& whisper_mel_filters() {
    static const std::vector<double> filters = build_mel_filters();
    return filters;
}

Result<LogMelSpectrogram> whisper_log_mel(std::span<const float> samples,
                                          const LogMelOptions& options) {
    const auto count = static_cast<std::int64_t>(samples.size());
    if (count < kWhisperHopLength) {
        return fail(ErrorCode::invalid_argument,
                    "log-mel: audio has " + std::to_string(count) +
                        " samples; at least 160 (10 ms at 16 kHz) are needed for one frame");
    }
    if (count > options.max_samples) {
        return fail(ErrorCode::out_of_range, "log-mel: audio has " + std::to_string(count) +
                                                 " samples, more than the " +
                                                 std::to_string(options.max_samples) + " allowed");
    }
    for (std::int64_t i = 0; i < count; ++i) {
        if (!std::isfinite(samples[static_cast<std::size_t>(i)])) {
            return fail(ErrorCode::invalid_argument,
                        "log-mel: sample " + std::to_string(i) + " is not a finite number");
        }
    }
    constexpr int kHalf = kWhisperFftSize / 2;
    const std::int64_t frames = count / kWhisperHopLength;  // the STFT's last frame is dropped

    // The reflect-padded signal; the window is applied per frame below (frames overlap).
    std::vector<float> padded(static_cast<std::size_t>(count + 2 * kHalf));
    std::copy(samples.begin(), samples.end(), padded.begin() + kHalf);
    for (std::int64_t i = 0; i < kHalf; ++i) {
        padded[static_cast<std::size_t>(i)] =
            samples[static_cast<std::size_t>(reflect_index(i - kHalf, count))];
        const std::int64_t tail = count + kHalf + i;
        padded[static_cast<std::size_t>(tail)] =
            samples[static_cast<std::size_t>(reflect_index(tail - kHalf, count))];
    }

    static const detail::PowerSpectrum400 spectrum(hann_window());
    const std::vector<SparseFilter>& filters = sparse_filters();
    // Over-aligned work arrays (std::vector of a vector type would not be aligned for it).
    struct Work {
        detail::PowerSpectrum400::Scratch scratch;
        alignas(64) std::array<detail::FloatLanes, kRealFftBins> power;
        alignas(64) std::array<detail::FloatLanes, kWhisperMelBins> log_mel;
    };
    const auto work = std::make_unique<Work>();
    const std::vector<float> silence(kWhisperFftSize, 0.0f);

    LogMelSpectrogram out;
    out.frames = frames;
    out.values.resize(static_cast<std::size_t>(kWhisperMelBins * frames));
    detail::FloatLanes max_lanes{};
    max_lanes -= std::numeric_limits<float>::infinity();
    for (std::int64_t t0 = 0; t0 < frames; t0 += kFftLanes) {
        const int lanes = static_cast<int>(std::min<std::int64_t>(kFftLanes, frames - t0));
        std::array<const float*, kFftLanes> frame_pointers{};
        for (int l = 0; l < kFftLanes; ++l) {
            frame_pointers[l] =
                l < lanes ? padded.data() + (t0 + l) * kWhisperHopLength : silence.data();
        }
        spectrum.compute(frame_pointers, work->scratch, work->power.data());
        log_mel_lanes(work->power.data(), filters, work->log_mel.data(), &max_lanes);
        for (int m = 0; m < kWhisperMelBins; ++m) {
            alignas(32) float lane_values[kFftLanes];
            std::memcpy(lane_values, &work->log_mel[m], sizeof(lane_values));
            float* row = out.values.data() + static_cast<std::size_t>(m) * frames + t0;
            std::copy(lane_values, lane_values + lanes, row);
        }
    }
    float max_value = max_lanes[0];
    for (int l = 1; l < kFftLanes; ++l) max_value = std::max(max_value, max_lanes[l]);
    const float floor = max_value - kDynamicRange;
    for (float& value : out.values) value = (std::max(value, floor) + 4.0f) / 4.0f;
    return out;
}

Result<std::vector<float>> to_whisper_input(const AudioBuffer& buffer) {
    OMNI_RETURN_IF_ERROR(validate(buffer));
    AudioBuffer mono{.sample_rate = buffer.sample_rate, .channels = 1, .samples = {}};
    const std::int64_t frames = buffer.frames();
    mono.samples.resize(static_cast<std::size_t>(frames));
    for (std::int64_t f = 0; f < frames; ++f) {
        double sum = 0;
        for (int c = 0; c < buffer.channels; ++c) {
            sum += buffer.samples[static_cast<std::size_t>(f * buffer.channels + c)];
        }
        mono.samples[static_cast<std::size_t>(f)] = static_cast<float>(sum / buffer.channels);
    }
    if (mono.sample_rate == kWhisperSampleRate) return std::move(mono.samples);
    OMNI_TRY(AudioBuffer resampled, resample(mono, kWhisperSampleRate));
    return std::move(resampled.samples);
}

}  // namespace omnirt::media

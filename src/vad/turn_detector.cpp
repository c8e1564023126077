#include "vad/turn_detector.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "vad/stream_resampler.h"

namespace omnirt::vad {
namespace {

constexpr int kSamplesPerMs = SileroModel::kSampleRate / 1000;  // 16
constexpr float kHysteresis = 0.15f;                            // Silero's neg_threshold gap
constexpr float kMinNegativeThreshold = 0.01f;

}  // namespace

struct TurnDetector::Impl {
    Impl(std::shared_ptr<const SileroModel> model, TurnDetectionOptions options_in, int rate,
         StreamResampler resampler_in)
        : options(options_in),
          negative_threshold(std::max(options_in.threshold - kHysteresis, kMinNegativeThreshold)),
          input_rate(rate),
          resampler(std::move(resampler_in)),
          stream(std::move(model)) {
        resampled.reserve(2 * SileroModel::kWindow);
    }

    const TurnDetectionOptions options;
    const float negative_threshold;
    const int input_rate;
    StreamResampler resampler;
    SileroStream stream;

    std::vector<float> scratch;      // one feed() call's pcm as float
    std::vector<float> resampled;    // 16 kHz samples not yet in a window
    std::int64_t origin_ms = 0;      // the clock at the last reset
    std::int64_t input_samples = 0;  // fed since the last reset
    std::int64_t windows = 0;        // processed since the last reset
    bool in_speech = false;
    std::optional<std::int64_t> silence_start;  // 16 kHz sample where a pending stop began

    [[nodiscard]] std::int64_t ms_at(std::int64_t sample_16k) const {
        return origin_ms + sample_16k / kSamplesPerMs;
    }

    void on_window(float probability, std::vector<VadEvent>& events) {
        const std::int64_t start = windows * SileroModel::kWindow;
        const std::int64_t end = start + SileroModel::kWindow;
        ++windows;
        if (probability >= options.threshold) {
            silence_start.reset();
            if (!in_speech) {
                in_speech = true;
                const std::int64_t at = ms_at(start);
                events.push_back({.kind = VadEvent::Kind::speech_started,
                                  .audio_ms = at,
                                  .padded_start_ms = std::max<std::int64_t>(
                                      origin_ms, at - options.prefix_padding_ms)});
            }
            return;
        }
        if (!in_speech) return;
        if (!silence_start && probability < negative_threshold) silence_start = start;
        if (silence_start &&
            end - *silence_start >=
                static_cast<std::int64_t>(options.silence_duration_ms) * kSamplesPerMs) {
            const std::int64_t at = ms_at(*silence_start);
            events.push_back(
                {.kind = VadEvent::Kind::speech_stopped, .audio_ms = at, .padded_start_ms = at});
            in_speech = false;
            silence_start.reset();
        }
    }
};

TurnDetector::TurnDetector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TurnDetector::~TurnDetector() = default;
TurnDetector::TurnDetector(TurnDetector&&) noexcept = default;
TurnDetector& TurnDetector::operator=(TurnDetector&&) noexcept = default;

Result<TurnDetector> TurnDetector::create(std::shared_ptr<const SileroModel> model,
                                          TurnDetectionOptions options, int input_sample_rate) {
    if (model == nullptr) return fail(ErrorCode::invalid_argument, "vad: no model");
    if (!(options.threshold > 0.0f && options.threshold < 1.0f)) {
        return fail(ErrorCode::invalid_argument,
                    "vad: turn_detection.threshold must be in (0, 1), got " +
                        std::to_string(options.threshold));
    }
    if (options.prefix_padding_ms < 0 || options.silence_duration_ms < 0) {
        return fail(ErrorCode::invalid_argument,
                    "vad: turn_detection.prefix_padding_ms and silence_duration_ms must be >= 0");
    }
    OMNI_TRY(auto resampler, StreamResampler::create(input_sample_rate, SileroModel::kSampleRate));
    return TurnDetector(
        std::make_unique<Impl>(std::move(model), options, input_sample_rate, std::move(resampler)));
}

std::vector<VadEvent> TurnDetector::feed(std::span<const std::int16_t> pcm) {
    Impl& d = *impl_;
    std::vector<VadEvent> events;
    if (pcm.empty()) return events;
    d.input_samples += static_cast<std::int64_t>(pcm.size());
    d.scratch.resize(pcm.size());
    std::transform(pcm.begin(), pcm.end(), d.scratch.begin(),
                   [](std::int16_t s) { return static_cast<float>(s) / 32768.0f; });
    d.resampler.push(d.scratch, d.resampled);
    std::size_t offset = 0;
    while (d.resampled.size() - offset >= SileroModel::kWindow) {
        const float probability = d.stream.process(
            std::span<const float>(d.resampled).subspan(offset, SileroModel::kWindow));
        d.on_window(probability, events);
        offset += SileroModel::kWindow;
    }
    d.resampled.erase(d.resampled.begin(),
                      d.resampled.begin() + static_cast<std::ptrdiff_t>(offset));
    return events;
}

void TurnDetector::reset() {
    Impl& d = *impl_;
    d.origin_ms = audio_ms();
    d.input_samples = 0;
    d.windows = 0;
    d.resampler.reset();
    d.resampled.clear();
    d.stream.reset();
    d.in_speech = false;
    d.silence_start.reset();
}

bool TurnDetector::in_speech() const { return impl_->in_speech; }

std::int64_t TurnDetector::audio_ms() const {
    return impl_->origin_ms + impl_->input_samples * 1000 / impl_->input_rate;
}

const TurnDetectionOptions& TurnDetector::options() const { return impl_->options; }

int TurnDetector::input_sample_rate() const { return impl_->input_rate; }

}  // namespace omnirt::vad

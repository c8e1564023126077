// TimeStretcher over RubberBandStretcher (real-time mode, R2 engine, no threads of its own).
#include "media/time_stretch.h"

#include <rubberband/RubberBandStretcher.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace omnirt::media {
namespace {

using RubberBand::RubberBandStretcher;

constexpr std::size_t kBlockFrames = 1024;  // the most frames one process() call gets
constexpr int kMinStretchRate = 8000;
constexpr int kMaxStretchRate = 192000;

}  // namespace

struct TimeStretcher::Engine {
    explicit Engine(int sample_rate, int channels, double speed)
        : stretcher(static_cast<std::size_t>(sample_rate), static_cast<std::size_t>(channels),
                    RubberBandStretcher::OptionProcessRealTime |
                        RubberBandStretcher::OptionEngineFaster |
                        RubberBandStretcher::OptionThreadingNever |
                        RubberBandStretcher::OptionChannelsTogether,
                    1.0 / speed, 1.0),
          planar(static_cast<std::size_t>(channels), std::vector<float>(kBlockFrames)),
          pointers(static_cast<std::size_t>(channels)) {
        stretcher.setMaxProcessSize(kBlockFrames);
        for (std::size_t c = 0; c < planar.size(); ++c) pointers[c] = planar[c].data();
    }

    // Feeds `frames` frames of interleaved `samples` (null: silence) in blocks; `final` marks
    // the end of the input on the last call. `after_block` drains between blocks.
    template <typename Drain>
    void feed(const float* samples, std::int64_t frames, bool final, Drain&& after_block) {
        const std::size_t channels = planar.size();
        std::int64_t done = 0;
        do {
            const auto block = static_cast<std::size_t>(
                std::min<std::int64_t>(frames - done, static_cast<std::int64_t>(kBlockFrames)));
            for (std::size_t c = 0; c < channels; ++c) {
                for (std::size_t i = 0; i < block; ++i) {
                    planar[c][i] =
                        samples == nullptr
                            ? 0.0f
                            : samples[(static_cast<std::size_t>(done) + i) * channels + c];
                }
            }
            done += static_cast<std::int64_t>(block);
            stretcher.process(pointers.data(), block, final && done == frames);
            after_block();
        } while (done < frames);
    }

    RubberBandStretcher stretcher;
    std::vector<std::vector<float>> planar;  // one block per channel, in and out
    std::vector<float*> pointers;
};

TimeStretcher::TimeStretcher(double speed, int sample_rate, int channels,
                             std::unique_ptr<Engine> engine)
    : speed_(speed), sample_rate_(sample_rate), channels_(channels), engine_(std::move(engine)) {}

TimeStretcher::~TimeStretcher() = default;

Result<std::unique_ptr<TimeStretcher>> TimeStretcher::create(double speed, int sample_rate,
                                                             int channels) {
    if (!std::isfinite(speed) || speed < kMinSpeed || speed > kMaxSpeed) {
        return fail(ErrorCode::invalid_argument,
                    "time stretch: speed " + std::to_string(speed) + " is outside 0.25..4.0");
    }
    if (sample_rate < kMinStretchRate || sample_rate > kMaxStretchRate) {
        return fail(ErrorCode::invalid_argument, "time stretch: sample rate " +
                                                     std::to_string(sample_rate) +
                                                     " Hz is outside 8000..192000");
    }
    if (channels < 1 || channels > kMaxChannels) {
        return fail(ErrorCode::invalid_argument,
                    "time stretch: " + std::to_string(channels) + " channels");
    }
    std::unique_ptr<Engine> engine;
    if (speed != 1.0) engine = std::make_unique<Engine>(sample_rate, channels, speed);
    std::unique_ptr<TimeStretcher> out(
        new TimeStretcher(speed, sample_rate, channels, std::move(engine)));
    if (out->engine_ != nullptr) {
        // Real-time mode neither pads nor compensates its delay: feed the preferred pad of
        // silence first and drop the start delay from the output (the library's recipe).
        RubberBandStretcher& stretcher = out->engine_->stretcher;
        out->delay_left_ = static_cast<std::int64_t>(stretcher.getStartDelay());
        const auto pad = static_cast<std::int64_t>(stretcher.getPreferredStartPad());
        AudioBuffer discard = out->empty();
        if (pad > 0) out->engine_->feed(nullptr, pad, false, [&] { out->drain(discard); });
    }
    return out;
}

void TimeStretcher::drain(AudioBuffer& out) {
    RubberBandStretcher& stretcher = engine_->stretcher;
    for (int available = stretcher.available(); available > 0; available = stretcher.available()) {
        const std::size_t got = stretcher.retrieve(
            engine_->pointers.data(), std::min(static_cast<std::size_t>(available), kBlockFrames));
        if (got == 0) break;
        std::size_t first = 0;
        if (delay_left_ > 0) {
            first = std::min(got, static_cast<std::size_t>(delay_left_));
            delay_left_ -= static_cast<std::int64_t>(first);
        }
        for (std::size_t i = first; i < got; ++i) {
            for (int c = 0; c < channels_; ++c) out.samples.push_back(engine_->planar[c][i]);
        }
    }
}

Result<AudioBuffer> TimeStretcher::push(const AudioBuffer& chunk) {
    if (finished_) {
        return fail(ErrorCode::failed_precondition, "time stretch: push after finish");
    }
    if (chunk.sample_rate != sample_rate_ || chunk.channels != channels_ ||
        chunk.samples.size() % static_cast<std::size_t>(channels_) != 0) {
        return fail(ErrorCode::invalid_argument,
                    "time stretch: a chunk of " + std::to_string(chunk.sample_rate) + " Hz, " +
                        std::to_string(chunk.channels) + " channel(s) after " +
                        std::to_string(sample_rate_) + " Hz, " + std::to_string(channels_));
    }
    if (engine_ == nullptr) return chunk;
    AudioBuffer out = empty();
    const std::int64_t frames = chunk.frames();
    if (frames == 0) return out;
    input_frames_ += frames;
    engine_->feed(chunk.samples.data(), frames, false, [&] { drain(out); });
    output_frames_ += out.frames();
    return out;
}

Result<AudioBuffer> TimeStretcher::finish() {
    if (finished_) {
        return fail(ErrorCode::failed_precondition, "time stretch: finish after finish");
    }
    finished_ = true;
    AudioBuffer out = empty();
    if (engine_ == nullptr) return out;
    if (input_frames_ > 0) {
        engine_->feed(nullptr, 0, true, [&] { drain(out); });
        // Real-time mode ends when available() says -1; a zero means nothing more will come.
        while (engine_->stretcher.available() > 0) drain(out);
    }
    // Exactly round(input / speed) frames in all: trim the overrun or pad the shortfall.
    const auto expected =
        static_cast<std::int64_t>(std::llround(static_cast<double>(input_frames_) / speed_));
    const std::int64_t wanted = std::max<std::int64_t>(0, expected - output_frames_);
    out.samples.resize(static_cast<std::size_t>(wanted * channels_), 0.0f);
    output_frames_ += wanted;
    return out;
}

Result<AudioBuffer> time_stretch(const AudioBuffer& buffer, double speed) {
    OMNI_RETURN_IF_ERROR(validate(buffer));
    OMNI_TRY(auto stretcher, TimeStretcher::create(speed, buffer.sample_rate, buffer.channels));
    OMNI_TRY(AudioBuffer out, stretcher->push(buffer));
    OMNI_TRY(AudioBuffer tail, stretcher->finish());
    out.samples.insert(out.samples.end(), tail.samples.begin(), tail.samples.end());
    return out;
}

}  // namespace omnirt::media

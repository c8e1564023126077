#pragma once
// Server-side turn detection with OpenAI Realtime `server_vad` semantics on top of Silero VAD.
//
// feed() takes mono pcm16 at the input rate in pieces of any size, resamples it to 16 kHz
// (streaming; the events do not depend on how the audio was split), runs the network on every
// complete 512-sample window (32 ms) and turns the probabilities into events:
//   - speech_started when a window's probability is >= threshold while not in speech;
//   - speech_stopped when, in speech, the probability has stayed below threshold for
//     silence_duration_ms since the first window below threshold - 0.15 (clamped to >= 0.01):
//     Silero's hysteresis (its VADIterator and get_speech_timestamps). A window back at
//     >= threshold cancels the pending stop; one between the two thresholds neither starts nor
//     cancels it.
// Times are milliseconds of input audio from the first sample ever fed (reset() does not restart
// the clock, matching OpenAI's "from the start of all audio written to the buffer during the
// session"); every event time lies on the 32 ms window grid of the audio since the last reset.
// An event is reported by the feed() call that completes its window; speech_stopped therefore
// comes silence_duration_ms (rounded up to whole windows) after the speech ended.
//
// Threads: not thread-safe; one per audio stream (a realtime session), used by one thread at a
// time. feed() runs the network on the calling thread (about 0.05 ms per 32 ms window on one
// core, docs/benchmarks.md) and never blocks. The model is shared read-only.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "vad/silero_vad.h"

namespace omnirt::vad {

// OpenAI Realtime `turn_detection: {type: "server_vad", ...}`.
struct TurnDetectionOptions {
    float threshold = 0.5f;         // speech probability that starts a turn; (0, 1)
    int prefix_padding_ms = 300;    // audio kept before the detected start (padded_start_ms)
    int silence_duration_ms = 500;  // silence that ends a turn; >= 0
};

struct VadEvent {
    enum class Kind : std::uint8_t { speech_started, speech_stopped };
    Kind kind = Kind::speech_started;
    // speech_started: the start of the first window at >= threshold (the detected onset, no
    // padding). speech_stopped: the end of the last speech window, i.e. the start of the
    // silence that ended the turn (OpenAI's audio_end_ms).
    std::int64_t audio_ms = 0;
    // speech_started: audio_ms - prefix_padding_ms, but not before the last reset() (or 0),
    // where the committed audio should begin; this is what OpenAI's speech_started reports as
    // audio_start_ms ("includes the prefix_padding_ms"). The caller also clamps it to the audio
    // it still holds (e.g. after the previous commit). speech_stopped: equal to audio_ms.
    std::int64_t padded_start_ms = 0;
    friend bool operator==(const VadEvent&, const VadEvent&) = default;
};

class TurnDetector {
  public:
    // input_sample_rate: 24000 for the Realtime API's pcm16, 16000, or another rate
    // StreamResampler accepts (8k, 44.1k, 48k, ...). invalid_argument for a null model,
    // threshold outside (0, 1), negative durations or an unsupported rate.
    [[nodiscard]] static Result<TurnDetector> create(std::shared_ptr<const SileroModel> model,
                                                     TurnDetectionOptions options,
                                                     int input_sample_rate);
    ~TurnDetector();
    TurnDetector(TurnDetector&&) noexcept;
    TurnDetector& operator=(TurnDetector&&) noexcept;

    // Any length, including empty. Returns the events the new audio completed, in order.
    [[nodiscard]] std::vector<VadEvent> feed(std::span<const std::int16_t> pcm);
    // Drops buffered audio, the network state and the turn state (e.g. after
    // input_audio_buffer.clear or a commit); the clock keeps running from the audio fed so far.
    void reset();

    [[nodiscard]] bool in_speech() const;
    // Milliseconds of input audio fed so far (the clock the events use).
    [[nodiscard]] std::int64_t audio_ms() const;
    [[nodiscard]] const TurnDetectionOptions& options() const;
    [[nodiscard]] int input_sample_rate() const;

  private:
    struct Impl;
    explicit TurnDetector(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace omnirt::vad

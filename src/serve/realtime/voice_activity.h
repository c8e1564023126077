#pragma once
// The seam between realtime sessions and voice activity detection: a session feeds its input
// audio to a VoiceActivity and acts on the speech start / stop events it reports (server_vad
// turn detection). The model behind it is chosen by whoever builds the server (omnirt serve:
// Silero VAD v5, docs/vad.md).
//
// Thread safety: one VoiceActivity per session, used by one thread at a time; the factory may
// be called from any thread.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"

namespace omnirt::serve::realtime {

// turn_detection {type: "server_vad", ...} of the protocol.
struct TurnDetection {
    double threshold = 0.5;                  // speech probability that starts speech, (0, 1)
    std::int64_t prefix_padding_ms = 300;    // audio kept before the detected start
    std::int64_t silence_duration_ms = 500;  // silence that ends speech
    bool create_response = true;             // a response starts when speech stops
    bool interrupt_response = true;          // speech cancels the response in progress
    friend bool operator==(const TurnDetection&, const TurnDetection&) = default;
};

struct VoiceEvent {
    bool started = false;  // speech started (true) or stopped (false)
    // Position in all audio fed to this detector (reset() does not restart the clock).
    std::int64_t audio_ms = 0;
};

class VoiceActivity {
  public:
    virtual ~VoiceActivity() = default;
    // Mono pcm16 at the rate the detector was made for; any length.
    virtual std::vector<VoiceEvent> feed(std::span<const std::int16_t> pcm) = 0;
    // Forgets buffered audio and the speech state (the buffer was cleared); the clock goes on.
    virtual void reset() = 0;
};

using VoiceActivityFactory = std::function<Result<std::unique_ptr<VoiceActivity>>(
    const TurnDetection& options, int sample_rate)>;

}  // namespace omnirt::serve::realtime

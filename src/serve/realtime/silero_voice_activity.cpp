#include "serve/realtime/silero_voice_activity.h"

#include "vad/turn_detector.h"

namespace omnirt::serve::realtime {
namespace {

class SileroVoiceActivity final : public VoiceActivity {
  public:
    explicit SileroVoiceActivity(vad::TurnDetector detector) : detector_(std::move(detector)) {}

    std::vector<VoiceEvent> feed(std::span<const std::int16_t> pcm) override {
        std::vector<VoiceEvent> out;
        for (const vad::VadEvent& event : detector_.feed(pcm)) {
            out.push_back({.started = event.kind == vad::VadEvent::Kind::speech_started,
                           .audio_ms = event.audio_ms});
        }
        return out;
    }
    void reset() override { detector_.reset(); }

  private:
    vad::TurnDetector detector_;
};

}  // namespace

Result<VoiceActivityFactory> silero_voice_activity(const std::string& model_path) {
    OMNI_TRY(auto model, vad::SileroModel::load(model_path));
    return VoiceActivityFactory([model](const TurnDetection& detection,
                                        int sample_rate) -> Result<std::unique_ptr<VoiceActivity>> {
        vad::TurnDetectionOptions options{
            .threshold = static_cast<float>(detection.threshold),
            .prefix_padding_ms = static_cast<int>(detection.prefix_padding_ms),
            .silence_duration_ms = static_cast<int>(detection.silence_duration_ms)};
        OMNI_TRY(auto detector, vad::TurnDetector::create(model, options, sample_rate));
        return std::unique_ptr<VoiceActivity>(
            std::make_unique<SileroVoiceActivity>(std::move(detector)));
    });
}

}  // namespace omnirt::serve::realtime

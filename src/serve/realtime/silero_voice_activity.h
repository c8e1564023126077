#pragma once
// Server VAD for realtime sessions with Silero VAD v5 (src/vad, docs/vad.md): the model is
// loaded once and shared; each session gets its own turn detector.
#include <string>

#include "core/error.h"
#include "serve/realtime/voice_activity.h"

namespace omnirt::serve::realtime {

// not_found / invalid_argument naming the file when the model cannot be loaded.
[[nodiscard]] Result<VoiceActivityFactory> silero_voice_activity(const std::string& model_path);

}  // namespace omnirt::serve::realtime

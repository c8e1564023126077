#pragma once
// The request-aware functions of the Qwen3-Omni speech pipeline (configs/qwen3_omni_speech.yaml):
// a request wants audio when metadata.api is "audio.speech" or its chat inputs.modalities holds
// "audio"; only such requests reach the talker and code2wav (no payload, no stream, no done
// signal otherwise).
//
//   qwen3_omni.route_speech          route (mm_aggregate): thinker, plus talker for audio
//   qwen3_omni.thinker_stream_done   stream_done (thinker): decode, plus talker for audio
//   qwen3_omni.speech_terminals      terminal_stages: decode, plus code2wav for audio
//   qwen3_omni.project_to_talker     projection: {input_ids, positions} of the thinker prompt
//
// The stage names are those of the config (kSpeech*Stage); a config that renames them needs its
// own functions. Thread safety: pure functions, any thread.
#include <string_view>

#include "core/error.h"
#include "core/registry.h"
#include "core/request.h"

namespace omnirt::models::qwen3_omni {

inline constexpr std::string_view kSpeechThinkerStage = "thinker";
inline constexpr std::string_view kSpeechTalkerStage = "talker";
inline constexpr std::string_view kSpeechDecodeStage = "decode";
inline constexpr std::string_view kSpeechCode2WavStage = "code2wav";

// Whether a request wants audio out. invalid_argument when inputs.modalities is not a list of
// strings.
[[nodiscard]] Result<bool> omni_wants_audio(const OmniRequest& request);

// The voice a request asks for: inputs.audio.voice (chat) or inputs.voice (speech); "" when
// absent. invalid_argument when it is not a string.
[[nodiscard]] Result<std::string> omni_requested_voice(const OmniRequest& request);

[[nodiscard]] Status register_speech_functions(Registry& registry = Registry::global());

}  // namespace omnirt::models::qwen3_omni

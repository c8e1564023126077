#pragma once
// A realtime session's configuration: what session.update changes and session.created /
// session.updated report, in the GA shape ({type: "realtime", audio: {input, output}, ...}) or,
// for clients that asked for the beta protocol, the beta shape (modalities, voice,
// input_audio_format, turn_detection at the top level). Both shapes are accepted in updates.
//
// Thread safety: plain values and pure functions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/openai/chat_request.h"
#include "serve/openai/protocol_error.h"
#include "serve/realtime/voice_activity.h"

namespace omnirt::serve::realtime {

inline constexpr int kAudioRate = 24000;  // pcm16 mono, both directions
inline constexpr std::int64_t kMaxOutputTokens = 4096;

struct SessionConfig {
    std::string id;
    std::string model;
    std::string instructions;
    std::vector<std::string> output_modalities{"audio"};  // ["audio"] or ["text"] (or both)
    std::string voice;                                    // "" -> the model's default voice
    std::optional<TurnDetection> turn_detection;          // absent: manual commits only
    std::optional<std::int64_t> max_output_tokens;        // absent: "inf" (the model's limit)
    std::optional<double> temperature;                    // beta field; absent: the model's
    // omnirt's extension, as in chat completions: per-stage sampling and parameters (e.g.
    // stage_sampling.talker.max_tokens caps the speech frames of each response).
    openai::StageOverrides overrides;
};

// What an update may choose from.
struct SessionChoices {
    std::vector<std::string> voices;  // lower-case; empty: any voice is passed on
    bool server_vad = false;          // a voice activity detector is available
    openai::RequestLimits limits;     // for stage_sampling / stage_params
};

// Applies the `session` object of session.update; on error nothing changes. `param` paths
// start with "session.".
[[nodiscard]] openai::ProtocolStatus apply_session_update(SessionConfig& config,
                                                          const nlohmann::json& session,
                                                          const SessionChoices& choices);

// The session object of session.created / session.updated.
[[nodiscard]] nlohmann::json session_json(const SessionConfig& config, bool beta);
[[nodiscard]] nlohmann::json turn_detection_json(const std::optional<TurnDetection>& detection);

// Shared by session.update and response.create.
[[nodiscard]] openai::ProtocolResult<std::vector<std::string>> parse_modalities(
    const nlohmann::json& value, const std::string& param);
[[nodiscard]] openai::ProtocolResult<std::string> parse_voice(const nlohmann::json& value,
                                                              const std::string& param,
                                                              const SessionChoices& choices);
[[nodiscard]] openai::ProtocolResult<std::optional<std::int64_t>> parse_max_output_tokens(
    const nlohmann::json& value, const std::string& param);

}  // namespace omnirt::serve::realtime

#include "serve/realtime/session_config.h"

#include <algorithm>
#include <cctype>

namespace omnirt::serve::realtime {
using nlohmann::json;
using openai::invalid_request;
using openai::ProtocolResult;
using openai::ProtocolStatus;

namespace {

const json* field(const json& object, const char* name) {
    auto it = object.find(name);
    return it == object.end() ? nullptr : &*it;
}

auto unsupported(const std::string& param, const std::string& what) {
    return invalid_request(param, what + " is not supported by this server");
}

// {type: "audio/pcm", rate: 24000} (GA) or "pcm16" (beta); anything else is refused.
ProtocolStatus check_format(const json& value, const std::string& param) {
    if (value.is_string()) {
        if (value.get<std::string>() == "pcm16") return {};
        return invalid_request(param, "audio format '" + value.get<std::string>() +
                                          "' is not supported (only pcm16 at 24 kHz)");
    }
    if (!value.is_object()) return invalid_request(param, "must be an object");
    const json* type = field(value, "type");
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "audio/pcm") {
        return invalid_request(param + ".type",
                               "only audio/pcm (pcm16 mono at 24 kHz) is supported");
    }
    if (const json* rate = field(value, "rate"); rate != nullptr) {
        if (!rate->is_number_integer() || rate->get<std::int64_t>() != kAudioRate) {
            return invalid_request(param + ".rate", "only 24000 Hz is supported");
        }
    }
    return {};
}

ProtocolResult<std::optional<TurnDetection>> parse_turn_detection(const json& value,
                                                                  const std::string& param,
                                                                  const SessionChoices& choices) {
    if (value.is_null()) return std::optional<TurnDetection>();
    if (!value.is_object()) return invalid_request(param, "must be an object or null");
    const json* type = field(value, "type");
    if (type == nullptr || !type->is_string()) {
        return invalid_request(param + ".type", "must be \"server_vad\"");
    }
    if (type->get<std::string>() != "server_vad") {
        return invalid_request(param + ".type", "turn detection '" + type->get<std::string>() +
                                                    "' is not supported (only server_vad)");
    }
    if (!choices.server_vad) {
        return invalid_request(param,
                               "server_vad is not available: this server runs without a "
                               "voice activity model (omnirt serve --vad-model)");
    }
    TurnDetection detection;
    if (const json* v = field(value, "threshold"); v != nullptr && !v->is_null()) {
        if (!v->is_number() || v->get<double>() <= 0.0 || v->get<double>() >= 1.0) {
            return invalid_request(param + ".threshold", "must be a number in (0, 1)");
        }
        detection.threshold = v->get<double>();
    }
    for (auto [name, target] : {std::pair{"prefix_padding_ms", &detection.prefix_padding_ms},
                                std::pair{"silence_duration_ms", &detection.silence_duration_ms}}) {
        const json* v = field(value, name);
        if (v == nullptr || v->is_null()) continue;
        if (!v->is_number_integer() || v->get<std::int64_t>() < 0 ||
            v->get<std::int64_t>() > 10000) {
            return invalid_request(param + "." + name, "must be an integer in [0, 10000]");
        }
        *target = v->get<std::int64_t>();
    }
    for (auto [name, target] : {std::pair{"create_response", &detection.create_response},
                                std::pair{"interrupt_response", &detection.interrupt_response}}) {
        const json* v = field(value, name);
        if (v == nullptr || v->is_null()) continue;
        if (!v->is_boolean()) return invalid_request(param + "." + name, "must be a boolean");
        *target = v->get<bool>();
    }
    if (const json* v = field(value, "idle_timeout_ms"); v != nullptr && !v->is_null()) {
        return unsupported(param + ".idle_timeout_ms", "idle_timeout_ms");
    }
    return std::optional<TurnDetection>(detection);
}

}  // namespace

ProtocolResult<std::vector<std::string>> parse_modalities(const json& value,
                                                          const std::string& param) {
    if (!value.is_array() || value.empty()) {
        return invalid_request(param, "must be a non-empty array of \"text\" / \"audio\"");
    }
    std::vector<std::string> modalities;
    for (const auto& entry : value) {
        if (!entry.is_string() ||
            (entry.get<std::string>() != "text" && entry.get<std::string>() != "audio")) {
            return invalid_request(param, "entries must be \"text\" or \"audio\"");
        }
        if (std::find(modalities.begin(), modalities.end(), entry.get<std::string>()) ==
            modalities.end()) {
            modalities.push_back(entry.get<std::string>());
        }
    }
    return modalities;
}

ProtocolResult<std::string> parse_voice(const json& value, const std::string& param,
                                        const SessionChoices& choices) {
    if (!value.is_string()) return invalid_request(param, "must be a string");
    std::string voice = value.get<std::string>();
    std::string lower = voice;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!choices.voices.empty() &&
        std::find(choices.voices.begin(), choices.voices.end(), lower) == choices.voices.end()) {
        std::string known;
        for (const auto& name : choices.voices) known += (known.empty() ? "" : ", ") + name;
        return invalid_request(param,
                               "unknown voice '" + voice + "' (this model has: " + known + ")");
    }
    return lower;
}

ProtocolResult<std::optional<std::int64_t>> parse_max_output_tokens(const json& value,
                                                                    const std::string& param) {
    if (value.is_null() || (value.is_string() && value.get<std::string>() == "inf")) {
        return std::optional<std::int64_t>();
    }
    if (!value.is_number_integer() || value.get<std::int64_t>() < 1 ||
        value.get<std::int64_t>() > kMaxOutputTokens) {
        return invalid_request(param, "must be an integer in [1, 4096] or \"inf\"");
    }
    return std::optional<std::int64_t>(value.get<std::int64_t>());
}

ProtocolStatus apply_session_update(SessionConfig& config, const json& session,
                                    const SessionChoices& choices) {
    if (!session.is_object()) return invalid_request("session", "must be an object");
    SessionConfig next = config;
    if (const json* type = field(session, "type"); type != nullptr) {
        if (!type->is_string() || type->get<std::string>() != "realtime") {
            return invalid_request("session.type",
                                   "only \"realtime\" sessions are supported (no transcription)");
        }
    }
    if (const json* v = field(session, "instructions"); v != nullptr) {
        if (!v->is_string()) return invalid_request("session.instructions", "must be a string");
        next.instructions = v->get<std::string>();
    }
    for (const char* name : {"output_modalities", "modalities"}) {
        if (const json* v = field(session, name); v != nullptr) {
            OMNI_TRY_P(next.output_modalities,
                       parse_modalities(*v, std::string("session.") + name));
        }
    }
    for (const char* name : {"max_output_tokens", "max_response_output_tokens"}) {
        if (const json* v = field(session, name); v != nullptr) {
            OMNI_TRY_P(next.max_output_tokens,
                       parse_max_output_tokens(*v, std::string("session.") + name));
        }
    }
    if (const json* v = field(session, "temperature"); v != nullptr && !v->is_null()) {
        if (!v->is_number() || v->get<double>() < 0.0 || v->get<double>() > 2.0) {
            return invalid_request("session.temperature", "must be a number in [0, 2]");
        }
        next.temperature = v->get<double>();
    }
    if (const json* v = field(session, "tools"); v != nullptr && !v->is_null()) {
        if (!v->is_array()) return invalid_request("session.tools", "must be an array");
        if (!v->empty()) return unsupported("session.tools", "function calling");
    }
    if (session.contains("stage_sampling") || session.contains("stage_params")) {
        auto overrides = openai::parse_stage_overrides(session, choices.limits);
        if (!overrides) {
            openai::ProtocolError e = overrides.error();
            e.param = "session." + e.param;
            return unexpected<openai::ProtocolError>(std::move(e));
        }
        next.overrides = std::move(*overrides);
    }
    // Beta: voice, input_audio_format, output_audio_format, turn_detection at the top level.
    if (const json* v = field(session, "voice"); v != nullptr) {
        OMNI_TRY_P(next.voice, parse_voice(*v, "session.voice", choices));
    }
    for (const char* name : {"input_audio_format", "output_audio_format"}) {
        if (const json* v = field(session, name); v != nullptr) {
            OMNI_RETURN_IF_ERROR_P(check_format(*v, std::string("session.") + name));
        }
    }
    if (const json* v = field(session, "turn_detection"); v != nullptr) {
        OMNI_TRY_P(next.turn_detection,
                   parse_turn_detection(*v, "session.turn_detection", choices));
    }
    if (const json* v = field(session, "input_audio_transcription");
        v != nullptr && !v->is_null()) {
        return unsupported("session.input_audio_transcription", "input audio transcription");
    }
    if (const json* audio = field(session, "audio"); audio != nullptr) {
        if (!audio->is_object()) return invalid_request("session.audio", "must be an object");
        if (const json* input = field(*audio, "input"); input != nullptr) {
            if (!input->is_object()) {
                return invalid_request("session.audio.input", "must be an object");
            }
            if (const json* v = field(*input, "format"); v != nullptr) {
                OMNI_RETURN_IF_ERROR_P(check_format(*v, "session.audio.input.format"));
            }
            if (const json* v = field(*input, "turn_detection"); v != nullptr) {
                OMNI_TRY_P(next.turn_detection,
                           parse_turn_detection(*v, "session.audio.input.turn_detection", choices));
            }
            if (const json* v = field(*input, "transcription"); v != nullptr && !v->is_null()) {
                return unsupported("session.audio.input.transcription",
                                   "input audio transcription");
            }
            if (const json* v = field(*input, "noise_reduction"); v != nullptr && !v->is_null()) {
                return unsupported("session.audio.input.noise_reduction", "noise reduction");
            }
        }
        if (const json* output = field(*audio, "output"); output != nullptr) {
            if (!output->is_object()) {
                return invalid_request("session.audio.output", "must be an object");
            }
            if (const json* v = field(*output, "format"); v != nullptr) {
                OMNI_RETURN_IF_ERROR_P(check_format(*v, "session.audio.output.format"));
            }
            if (const json* v = field(*output, "voice"); v != nullptr) {
                OMNI_TRY_P(next.voice, parse_voice(*v, "session.audio.output.voice", choices));
            }
            if (const json* v = field(*output, "speed"); v != nullptr && !v->is_null()) {
                if (!v->is_number() || v->get<double>() != 1.0) {
                    return unsupported("session.audio.output.speed", "a speed other than 1.0");
                }
            }
        }
    }
    config = std::move(next);
    return {};
}

json turn_detection_json(const std::optional<TurnDetection>& detection) {
    if (!detection) return nullptr;
    return {{"type", "server_vad"},
            {"threshold", detection->threshold},
            {"prefix_padding_ms", detection->prefix_padding_ms},
            {"silence_duration_ms", detection->silence_duration_ms},
            {"create_response", detection->create_response},
            {"interrupt_response", detection->interrupt_response},
            {"idle_timeout_ms", nullptr}};
}

json session_json(const SessionConfig& config, bool beta) {
    json max_tokens = config.max_output_tokens ? json(*config.max_output_tokens) : json("inf");
    if (beta) {
        json out = {{"id", config.id},
                    {"object", "realtime.session"},
                    {"model", config.model},
                    {"modalities", config.output_modalities},
                    {"instructions", config.instructions},
                    {"voice", config.voice},
                    {"input_audio_format", "pcm16"},
                    {"output_audio_format", "pcm16"},
                    {"input_audio_transcription", nullptr},
                    {"turn_detection", turn_detection_json(config.turn_detection)},
                    {"tools", json::array()},
                    {"max_response_output_tokens", max_tokens}};
        if (config.temperature) out["temperature"] = *config.temperature;
        return out;
    }
    json format = {{"type", "audio/pcm"}, {"rate", kAudioRate}};
    return {{"type", "realtime"},
            {"object", "realtime.session"},
            {"id", config.id},
            {"model", config.model},
            {"output_modalities", config.output_modalities},
            {"instructions", config.instructions},
            {"audio",
             {{"input",
               {{"format", format},
                {"transcription", nullptr},
                {"noise_reduction", nullptr},
                {"turn_detection", turn_detection_json(config.turn_detection)}}},
              {"output", {{"format", format}, {"voice", config.voice}, {"speed", 1.0}}}}},
            {"tools", json::array()},
            {"tool_choice", "auto"},
            {"max_output_tokens", max_tokens}};
}

}  // namespace omnirt::serve::realtime

#include "serve/openai/speech_request.h"

#include <array>

#include "serve/openai/chat_request.h"
#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kFormats{{
    {"wav", "audio/wav"},
    {"pcm", "audio/pcm"},
    {"flac", "audio/flac"},
    {"opus", "audio/ogg"},
    {"mp3", "audio/mpeg"},
    {"aac", "audio/aac"},
}};

// The body is valid UTF-8 (the JSON parser checks), so code points are the non-continuation bytes.
std::size_t code_points(std::string_view text) {
    std::size_t count = 0;
    for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return count;
}

}  // namespace

std::string_view speech_content_type(std::string_view response_format) {
    for (const auto& [name, type] : kFormats) {
        if (name == response_format) return type;
    }
    return "application/octet-stream";
}

ProtocolResult<SpeechRequest> parse_speech_request(std::string_view body,
                                                   const RequestLimits& limits,
                                                   const MediaPolicy& media) {
    OMNI_TRY_P(const nlohmann::json json, parse_body(body, limits));
    SpeechRequest out;
    OMNI_TRY_P(auto model, read_string(json, "model", "", 256));
    if (!model || model->empty()) return invalid_request("model", "'model' is required");
    out.model = std::move(*model);
    // 4 bytes per code point at most: the byte bound is checked first, the count after.
    OMNI_TRY_P(auto input, read_string(json, "input", "", limits.max_speech_input_chars * 4));
    if (!input || input->empty()) {
        return invalid_request("input", "'input' is required and must not be empty");
    }
    if (code_points(*input) > limits.max_speech_input_chars) {
        return invalid_request("input", "'input' is longer than " +
                                            std::to_string(limits.max_speech_input_chars) +
                                            " characters");
    }
    out.input = std::move(*input);
    OMNI_TRY_P(auto voice, read_string(json, "voice", "", 128));
    if (voice) out.voice = std::move(*voice);
    OMNI_TRY_P(auto instructions, read_string(json, "instructions", "", limits.max_string_bytes));
    if (instructions) out.instructions = std::move(*instructions);
    OMNI_TRY_P(auto format, read_string(json, "response_format", "", 16));
    if (format) {
        if (speech_content_type(*format) == "application/octet-stream") {
            return invalid_request(
                "response_format",
                "'response_format' must be one of wav, pcm, flac, opus, mp3, aac, "
                "not '" +
                    *format + "'");
        }
        out.response_format = std::move(*format);
    }
    OMNI_TRY_P(auto speed, read_number(json, "speed", ""));
    if (speed) {
        if (*speed < 0.25 || *speed > 4.0) {
            return invalid_request(
                "speed", "'speed' must be in [0.25, 4.0], got " + nlohmann::json(*speed).dump());
        }
        out.speed = *speed;
    }
    OMNI_TRY_P(auto stream, read_bool(json, "stream", ""));
    OMNI_TRY_P(auto stream_format, read_string(json, "stream_format", "", 16));
    if (stream_format && *stream_format != "sse" && *stream_format != "audio") {
        return invalid_request(
            "stream_format", "'stream_format' must be sse or audio, not '" + *stream_format + "'");
    }
    out.stream_audio = stream_format && *stream_format == "audio";
    out.stream =
        !out.stream_audio && (stream.value_or(false) || (stream_format && *stream_format == "sse"));
    OMNI_TRY_P(out.sampling, parse_sampling(json, ""));
    // max_new_tokens: SGLang-Omni's name for it (its benchmark client sends it); max_tokens
    // wins when both are given.
    OMNI_TRY_P(out.max_tokens, read_int(json, "max_tokens", ""));
    std::string max_tokens_field = "max_tokens";
    if (!out.max_tokens) {
        OMNI_TRY_P(out.max_tokens, read_int(json, "max_new_tokens", ""));
        max_tokens_field = "max_new_tokens";
    }
    if (out.max_tokens && (*out.max_tokens < 1 || *out.max_tokens > limits.max_tokens)) {
        return invalid_request(max_tokens_field, "'" + max_tokens_field + "' must be in [1, " +
                                                     std::to_string(limits.max_tokens) + "]");
    }
    OMNI_TRY_P(auto overrides, parse_stage_overrides(json, limits));
    out.stage_sampling = std::move(overrides.sampling);
    out.stage_params = std::move(overrides.params);
    OMNI_TRY_P(out.references, parse_speech_references(json, limits, media));
    const auto legacy = json.find("ref_audio");
    out.legacy_reference = legacy != json.end() && !legacy->is_null();
    return out;
}

OmniRequest to_omni_request(const SpeechRequest& request) {
    OmniRequest out;
    Map inputs;
    inputs.emplace("text", Value(request.input));
    inputs.emplace("voice", Value(request.voice));
    inputs.emplace("instructions", Value(request.instructions));
    inputs.emplace("response_format", Value(request.response_format));
    inputs.emplace("speed", Value(request.speed));
    if (!request.references.empty()) {
        inputs.emplace("references", references_to_value(request.references));
    }
    out.inputs = Value(std::move(inputs));
    Map params;
    params.emplace("sampling", sampling_to_value(request.sampling));
    put_stage_overrides(request.stage_sampling, request.stage_params, params);
    if (request.max_tokens) params.emplace("max_tokens", Value(*request.max_tokens));
    if (request.sampling.seed) params.emplace("seed", Value(*request.sampling.seed));
    params.emplace("stream", Value(request.stream || request.stream_audio));
    out.params = Value(std::move(params));
    Map metadata;
    metadata.emplace("api", Value("audio.speech"));
    metadata.emplace("model", Value(request.model));
    out.metadata = Value(std::move(metadata));
    return out;
}

}  // namespace omnirt::serve::openai

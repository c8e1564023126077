#include "serve/openai/chat_request.h"

#include <algorithm>

#include "config/value_json.h"
#include "serve/openai/chat_messages.h"
#include "serve/openai/common_fields.h"
#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

ProtocolResult<std::vector<std::string>> parse_modalities(const Json& body) {
    std::vector<std::string> out;
    const auto it = body.find("modalities");
    if (it == body.end() || it->is_null()) return std::vector<std::string>{"text"};
    if (!it->is_array()) {
        return invalid_request(
            "modalities", "'modalities' must be an array, not " + std::string(json_type_name(*it)));
    }
    if (it->empty() || it->size() > 2) {
        return invalid_request("modalities",
                               "'modalities' must be [\"text\"] or "
                               "[\"text\", \"audio\"]");
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
        const Json& item = (*it)[i];
        const std::string path = index_path("modalities", i);
        if (!item.is_string() || (item != "text" && item != "audio")) {
            return invalid_request(path, "'" + path + "' must be \"text\" or \"audio\"");
        }
        if (std::find(out.begin(), out.end(), item.get<std::string>()) != out.end()) {
            return invalid_request(path, "'" + path + "' repeats a modality");
        }
        out.push_back(item.get<std::string>());
    }
    return out;
}

ProtocolStatus check_stage_name(const std::string& name, const std::string& path) {
    if (name.empty() || name.size() > 128) {
        return invalid_request(path, "'" + path +
                                         "' must be named by a stage name of 1 to 128 "
                                         "bytes");
    }
    return {};
}

}  // namespace

bool ChatRequest::wants_audio() const {
    return std::find(modalities.begin(), modalities.end(), "audio") != modalities.end();
}

ProtocolResult<StageOverrides> parse_stage_overrides(const Json& body,
                                                     const RequestLimits& limits) {
    StageOverrides out;
    OMNI_TRY_P(const Json* sampling, optional_object(body, "stage_sampling", ""));
    if (sampling != nullptr) {
        if (sampling->size() > limits.max_stages) {
            return invalid_request("stage_sampling", "'stage_sampling' names more than " +
                                                         std::to_string(limits.max_stages) +
                                                         " stages");
        }
        for (const auto& [stage, entry] : sampling->items()) {
            const std::string path = field_path("stage_sampling", stage);
            OMNI_RETURN_IF_ERROR_P(check_stage_name(stage, path));
            OMNI_TRY_P(const Json* object, optional_object(*sampling, stage, "stage_sampling"));
            if (object == nullptr) continue;
            OMNI_TRY_P(auto params, parse_sampling(*object, path));
            OMNI_TRY_P(params.max_tokens, read_int(*object, "max_tokens", path));
            if (params.max_tokens && *params.max_tokens < 0) {
                const std::string where = field_path(path, "max_tokens");
                return invalid_request(where, "'" + where + "' must be >= 0, got " +
                                                  std::to_string(*params.max_tokens));
            }
            out.sampling.emplace(stage, std::move(params));
        }
    }
    OMNI_TRY_P(const Json* params, optional_object(body, "stage_params", ""));
    if (params != nullptr) {
        if (params->size() > limits.max_stages) {
            return invalid_request(
                "stage_params",
                "'stage_params' names more than " + std::to_string(limits.max_stages) + " stages");
        }
        for (const auto& [stage, entry] : params->items()) {
            const std::string path = field_path("stage_params", stage);
            OMNI_RETURN_IF_ERROR_P(check_stage_name(stage, path));
            OMNI_TRY_P(const Json* object, optional_object(*params, stage, "stage_params"));
            if (object == nullptr) continue;
            auto value = config::json_to_value(*object, limits.max_depth);
            if (!value.has_value()) {
                return invalid_request(path, "'" + path + "': " + value.error().message);
            }
            out.params.emplace(stage, std::move(*value));
        }
    }
    return out;
}

ProtocolResult<ChatRequest> parse_chat_request(std::string_view body, const RequestLimits& limits,
                                               const MediaPolicy& media) {
    OMNI_TRY_P(const Json json, parse_body(body, limits));
    ChatRequest out;
    OMNI_TRY_P(auto model, read_string(json, "model", "", 256));
    if (!model || model->empty()) return invalid_request("model", "'model' is required");
    out.model = std::move(*model);
    OMNI_TRY_P(out.messages, parse_messages(json, limits, media));
    OMNI_TRY_P(out.modalities, parse_modalities(json));
    OMNI_TRY_P(const Json* audio, optional_object(json, "audio", ""));
    if (audio != nullptr) {
        OMNI_TRY_P(auto voice, read_string(*audio, "voice", "audio", 128));
        if (voice) out.audio_voice = std::move(*voice);
        OMNI_TRY_P(auto format, read_string(*audio, "format", "audio", 16));
        if (format) {
            if (*format != "wav" && *format != "pcm16" && *format != "flac" && *format != "opus" &&
                *format != "mp3") {
                return invalid_request("audio.format",
                                       "'audio.format' must be one of wav, pcm16, flac, opus, "
                                       "mp3, not '" +
                                           *format + "'");
            }
            out.audio_format = std::move(*format);
        }
    }
    OMNI_TRY_P(out.sampling, parse_sampling(json, ""));
    OMNI_TRY_P(out.max_tokens, parse_max_tokens(json, limits));
    OMNI_TRY_P(out.stop, parse_stop(json, limits));
    OMNI_TRY_P(auto n, read_int(json, "n", ""));
    if (n && *n != 1) {
        return invalid_request("n",
                               "'n' must be 1: this server generates one choice per "
                               "request, got " +
                                   std::to_string(*n));
    }
    OMNI_TRY_P(StreamFields stream, parse_stream_fields(json));
    out.stream = stream.stream;
    out.include_usage = stream.include_usage;
    OMNI_TRY_P(auto logprobs, read_bool(json, "logprobs", ""));
    out.logprobs = logprobs.value_or(false);
    OMNI_TRY_P(out.top_logprobs, read_int(json, "top_logprobs", ""));
    if (out.top_logprobs) {
        if (*out.top_logprobs < 0 || *out.top_logprobs > kMaxTopLogprobs) {
            return invalid_request("top_logprobs", "'top_logprobs' must be in [0, " +
                                                       std::to_string(kMaxTopLogprobs) + "], got " +
                                                       std::to_string(*out.top_logprobs));
        }
        if (!out.logprobs) {
            return invalid_request("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
        }
    }
    OMNI_TRY_P(auto overrides, parse_stage_overrides(json, limits));
    out.stage_sampling = std::move(overrides.sampling);
    out.stage_params = std::move(overrides.params);
    OMNI_TRY_P(auto user, read_string(json, "user", "", 256));
    if (user) out.user = std::move(*user);
    return out;
}

void put_stage_overrides(const std::map<std::string, SamplingParams>& sampling,
                         const std::map<std::string, Value>& params, Map& out) {
    Map stage_sampling;
    for (const auto& [stage, entry] : sampling)
        stage_sampling.emplace(stage, sampling_to_value(entry));
    Map stage_params;
    for (const auto& [stage, entry] : params) stage_params.emplace(stage, entry);
    out.insert_or_assign("stage_sampling", Value(std::move(stage_sampling)));
    out.insert_or_assign("stage_params", Value(std::move(stage_params)));
}

}  // namespace omnirt::serve::openai

// Request fields shared by the generation endpoints (common_fields.h).
#include "serve/openai/common_fields.h"

#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {

using Json = nlohmann::json;

ProtocolResult<std::vector<std::string>> parse_stop(const Json& body, const RequestLimits& limits) {
    std::vector<std::string> out;
    const auto it = body.find("stop");
    if (it == body.end() || it->is_null()) return out;
    if (it->is_string()) {
        OMNI_TRY_P(auto stop, read_string(body, "stop", "", limits.max_string_bytes));
        out.push_back(std::move(*stop));
        return out;
    }
    if (!it->is_array()) {
        return invalid_request("stop", "'stop' must be a string or an array of strings, not " +
                                           std::string(json_type_name(*it)));
    }
    if (it->size() > limits.max_stop_sequences) {
        return invalid_request("stop", "'stop' has more than " +
                                           std::to_string(limits.max_stop_sequences) + " entries");
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
        const Json& item = (*it)[i];
        const std::string path = index_path("stop", i);
        if (!item.is_string()) {
            return invalid_request(
                path, "'" + path + "' must be a string, not " + std::string(json_type_name(item)));
        }
        if (item.get_ref<const std::string&>().size() > limits.max_string_bytes) {
            return invalid_request(path, "'" + path + "' is too long");
        }
        out.push_back(item.get<std::string>());
    }
    return out;
}

ProtocolResult<std::optional<std::int64_t>> parse_max_tokens(const Json& body,
                                                             const RequestLimits& limits) {
    OMNI_TRY_P(auto legacy, read_int(body, "max_tokens", ""));
    OMNI_TRY_P(auto current, read_int(body, "max_completion_tokens", ""));
    for (const auto& [name, value] :
         {std::pair{"max_tokens", legacy}, std::pair{"max_completion_tokens", current}}) {
        if (value && (*value < 1 || *value > limits.max_tokens)) {
            return invalid_request(name, std::string("'") + name + "' must be in [1, " +
                                             std::to_string(limits.max_tokens) + "], got " +
                                             std::to_string(*value));
        }
    }
    if (legacy && current && *legacy != *current) {
        return invalid_request("max_tokens",
                               "'max_tokens' and 'max_completion_tokens' disagree; send one");
    }
    return current ? current : legacy;
}

ProtocolResult<const Json*> optional_object(const Json& body, std::string_view key,
                                            std::string_view parent) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    if (!it->is_object()) {
        const std::string path = field_path(parent, key);
        return invalid_request(
            path, "'" + path + "' must be an object, not " + std::string(json_type_name(*it)));
    }
    return &*it;
}

ProtocolResult<StreamFields> parse_stream_fields(const Json& body) {
    StreamFields out;
    OMNI_TRY_P(auto stream, read_bool(body, "stream", ""));
    out.stream = stream.value_or(false);
    OMNI_TRY_P(const Json* stream_options, optional_object(body, "stream_options", ""));
    if (stream_options != nullptr) {
        if (!out.stream) {
            return invalid_request("stream_options",
                                   "'stream_options' is only allowed when 'stream' is true");
        }
        OMNI_TRY_P(auto include, read_bool(*stream_options, "include_usage", "stream_options"));
        out.include_usage = include.value_or(false);
    }
    return out;
}

}  // namespace omnirt::serve::openai

// Decoding of chat `messages` and their content parts (see chat_request.h).
#include <array>

#include "serve/openai/chat_messages.h"
#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

constexpr std::array<std::string_view, 5> kRoles{"system", "developer", "user", "assistant",
                                                 "tool"};

ProtocolResult<const Json*> required_object(const Json& parent, std::string_view key,
                                            const std::string& parent_path) {
    const std::string path = field_path(parent_path, key);
    const auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) {
        return invalid_request(path, "'" + path + "' is required");
    }
    if (!it->is_object()) {
        return invalid_request(
            path, "'" + path + "' must be an object, not " + std::string(json_type_name(*it)));
    }
    return &*it;
}

ProtocolResult<std::string> required_string(const Json& object, std::string_view key,
                                            const std::string& parent_path, std::size_t max) {
    OMNI_TRY_P(auto value, read_string(object, key, parent_path, max));
    if (!value) {
        const std::string path = field_path(parent_path, key);
        return invalid_request(path, "'" + path + "' is required");
    }
    return std::move(*value);
}

// image_url / video_url / audio_url: an object {url, detail?}; a bare string is accepted too.
ProtocolResult<ContentPart> url_part(const Json& part, std::string_view key, MediaKind kind,
                                     const std::string& path, const RequestLimits& limits,
                                     const MediaPolicy& media) {
    const std::string key_path = field_path(path, key);
    const auto it = part.find(key);
    std::string url;
    std::string detail;
    if (it != part.end() && it->is_string()) {
        url = it->get<std::string>();
    } else {
        OMNI_TRY_P(const Json* object, required_object(part, key, path));
        OMNI_TRY_P(url, required_string(*object, "url", key_path, limits.max_body_bytes));
        if (kind == MediaKind::image) {
            OMNI_TRY_P(auto value, read_string(*object, "detail", key_path, 16));
            if (value) {
                if (*value != "auto" && *value != "low" && *value != "high") {
                    const std::string detail_path = field_path(key_path, "detail");
                    return invalid_request(detail_path,
                                           "'" + detail_path + "' must be auto, low or high");
                }
                detail = std::move(*value);
            }
        }
    }
    ContentPart out;
    out.type = kind == MediaKind::image   ? ContentPartType::image
               : kind == MediaKind::audio ? ContentPartType::audio
                                          : ContentPartType::video;
    OMNI_TRY_P(out.media, resolve_media_url(url, kind, media, limits, field_path(key_path, "url")));
    out.detail = std::move(detail);
    return out;
}

ProtocolResult<ContentPart> parse_part(const Json& part, const std::string& path, bool allow_media,
                                       const RequestLimits& limits, const MediaPolicy& media) {
    if (!part.is_object()) {
        return invalid_request(
            path, "'" + path + "' must be an object, not " + std::string(json_type_name(part)));
    }
    OMNI_TRY_P(const std::string type, required_string(part, "type", path, 64));
    if (type == "text") {
        ContentPart out;
        OMNI_TRY_P(out.text, required_string(part, "text", path, limits.max_string_bytes));
        return out;
    }
    const bool is_media =
        type == "image_url" || type == "input_audio" || type == "video_url" || type == "audio_url";
    if (!is_media) {
        const std::string type_path = field_path(path, "type");
        return invalid_request(type_path, "'" + type_path +
                                              "' must be text, image_url, input_audio or "
                                              "video_url, not '" +
                                              type + "'");
    }
    if (!allow_media) {
        const std::string type_path = field_path(path, "type");
        return invalid_request(
            type_path, "'" + type_path + "': only user messages may hold " + type + " parts");
    }
    if (type == "image_url")
        return url_part(part, "image_url", MediaKind::image, path, limits, media);
    if (type == "video_url")
        return url_part(part, "video_url", MediaKind::video, path, limits, media);
    if (type == "audio_url")
        return url_part(part, "audio_url", MediaKind::audio, path, limits, media);
    const std::string audio_path = field_path(path, "input_audio");
    OMNI_TRY_P(const Json* audio, required_object(part, "input_audio", path));
    OMNI_TRY_P(const std::string data,
               required_string(*audio, "data", audio_path, limits.max_body_bytes));
    OMNI_TRY_P(const std::string format, required_string(*audio, "format", audio_path, 16));
    ContentPart out;
    out.type = ContentPartType::audio;
    OMNI_TRY_P(out.media, decode_input_audio(data, format, limits, audio_path));
    return out;
}

ProtocolResult<ChatMessage> parse_message(const Json& item, const std::string& path,
                                          const RequestLimits& limits, const MediaPolicy& media) {
    if (!item.is_object()) {
        return invalid_request(
            path, "'" + path + "' must be an object, not " + std::string(json_type_name(item)));
    }
    ChatMessage message;
    OMNI_TRY_P(message.role, required_string(item, "role", path, 32));
    bool known = false;
    for (const auto role : kRoles) known = known || role == message.role;
    if (!known) {
        const std::string role_path = field_path(path, "role");
        return invalid_request(role_path, "'" + role_path +
                                              "' must be system, developer, user, assistant or "
                                              "tool, not '" +
                                              message.role + "'");
    }
    OMNI_TRY_P(auto name, read_string(item, "name", path, 256));
    if (name) message.name = std::move(*name);
    if (message.role == "tool") {
        OMNI_TRY_P(message.tool_call_id, required_string(item, "tool_call_id", path, 256));
    }
    const std::string content_path = field_path(path, "content");
    const auto content = item.find("content");
    if (content == item.end() || content->is_null()) {
        if (message.role == "assistant") return message;  // e.g. tool calls only
        return invalid_request(content_path, "'" + content_path + "' is required");
    }
    if (content->is_string()) {
        ContentPart part;
        OMNI_TRY_P(auto text, read_string(item, "content", path, limits.max_string_bytes));
        part.text = std::move(*text);
        message.content.push_back(std::move(part));
        return message;
    }
    if (!content->is_array()) {
        return invalid_request(content_path, "'" + content_path +
                                                 "' must be a string or an array of parts, not " +
                                                 std::string(json_type_name(*content)));
    }
    if (content->size() > limits.max_parts) {
        return invalid_request(content_path, "'" + content_path + "' has more than " +
                                                 std::to_string(limits.max_parts) + " parts");
    }
    const bool allow_media = message.role == "user";
    for (std::size_t i = 0; i < content->size(); ++i) {
        OMNI_TRY_P(auto part, parse_part((*content)[i], index_path(content_path, i), allow_media,
                                         limits, media));
        message.content.push_back(std::move(part));
    }
    return message;
}

}  // namespace

ProtocolResult<std::vector<ChatMessage>> parse_messages(const Json& body,
                                                        const RequestLimits& limits,
                                                        const MediaPolicy& media) {
    const auto it = body.find("messages");
    if (it == body.end() || it->is_null())
        return invalid_request("messages", "'messages' is required");
    if (!it->is_array()) {
        return invalid_request(
            "messages", "'messages' must be an array, not " + std::string(json_type_name(*it)));
    }
    if (it->empty()) return invalid_request("messages", "'messages' must not be empty");
    if (it->size() > limits.max_messages) {
        return invalid_request("messages", "'messages' has more than " +
                                               std::to_string(limits.max_messages) + " entries");
    }
    std::vector<ChatMessage> messages;
    messages.reserve(it->size());
    for (std::size_t i = 0; i < it->size(); ++i) {
        OMNI_TRY_P(auto message, parse_message((*it)[i], index_path("messages", i), limits, media));
        messages.push_back(std::move(message));
    }
    return messages;
}

}  // namespace omnirt::serve::openai

#include "serve/realtime/conversation.h"

#include <algorithm>

#include "media/audio.h"
#include "serve/openai/base64.h"
#include "serve/openai/media.h"

namespace omnirt::serve::realtime {
using nlohmann::json;
using openai::invalid_request;
using openai::ProtocolResult;

namespace {

constexpr std::size_t kMaxIdBytes = 64;

std::string_view type_name(PartType type, bool beta) {
    switch (type) {
        case PartType::input_text:
            return "input_text";
        case PartType::input_audio:
            return "input_audio";
        case PartType::input_image:
            return "input_image";
        case PartType::output_text:
            return beta ? "text" : "output_text";
        case PartType::output_audio:
            return beta ? "audio" : "output_audio";
    }
    return "input_text";
}

ProtocolResult<std::string> string_field(const json& object, const char* name,
                                         const std::string& param, const ItemLimits& limits,
                                         bool required) {
    auto it = object.find(name);
    if (it == object.end() || it->is_null()) {
        if (required) return invalid_request(param + "." + name, "is required");
        return std::string();
    }
    if (!it->is_string()) return invalid_request(param + "." + name, "must be a string");
    if (it->get_ref<const std::string&>().size() > limits.request.max_string_bytes) {
        return invalid_request(param + "." + name, "is too long");
    }
    return it->get<std::string>();
}

ProtocolResult<Part> parse_part(const json& value, const std::string& role,
                                const std::string& param, const ItemLimits& limits) {
    if (!value.is_object()) return invalid_request(param, "must be an object");
    auto type = value.find("type");
    if (type == value.end() || !type->is_string()) {
        return invalid_request(param + ".type", "must be a string");
    }
    const std::string& name = type->get_ref<const std::string&>();
    Part part;
    const bool user = role == "user";
    const bool assistant = role == "assistant";
    if (name == "input_text" && !assistant) {
        part.type = PartType::input_text;
        OMNI_TRY_P(part.text, string_field(value, "text", param, limits, true));
    } else if (name == "input_audio" && user) {
        part.type = PartType::input_audio;
        OMNI_TRY_P(std::string data, string_field(value, "audio", param, limits, false));
        OMNI_TRY_P(part.transcript, string_field(value, "transcript", param, limits, false));
        if (data.empty()) return invalid_request(param + ".audio", "is required (base64 pcm16)");
        auto bytes = openai::base64_decode(data);
        if (!bytes) return invalid_request(param + ".audio", "is not valid base64");
        if (bytes->size() % 2 != 0) {
            return invalid_request(param + ".audio", "pcm16 needs an even number of bytes");
        }
        part.audio = pcm16_samples(*bytes);
    } else if (name == "input_image" && user) {
        part.type = PartType::input_image;
        OMNI_TRY_P(part.image_url, string_field(value, "image_url", param, limits, true));
        OMNI_TRY_P(part.detail, string_field(value, "detail", param, limits, false));
        openai::MediaPolicy data_only;  // images of items are data URLs
        OMNI_RETURN_IF_ERROR_P(openai::resolve_media_url(part.image_url, openai::MediaKind::image,
                                                         data_only, limits.request,
                                                         param + ".image_url"));
    } else if ((name == "output_text" || name == "text") && assistant) {
        part.type = PartType::output_text;
        OMNI_TRY_P(part.text, string_field(value, "text", param, limits, true));
    } else if ((name == "output_audio" || name == "audio") && assistant) {
        part.type = PartType::output_audio;
        OMNI_TRY_P(part.transcript, string_field(value, "transcript", param, limits, false));
    } else {
        return invalid_request(param + ".type", "content type '" + name + "' is not allowed in a " +
                                                    role + " message");
    }
    return part;
}

}  // namespace

std::vector<std::int16_t> pcm16_samples(const std::vector<std::uint8_t>& bytes) {
    std::vector<std::int16_t> samples(bytes.size() / 2);
    for (std::size_t i = 0; i < samples.size(); ++i) {
        samples[i] = static_cast<std::int16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
    }
    return samples;
}

std::string base64_pcm16(const std::vector<std::int16_t>& samples) {
    std::vector<std::uint8_t> bytes(samples.size() * 2);
    for (std::size_t i = 0; i < samples.size(); ++i) {
        auto value = static_cast<std::uint16_t>(samples[i]);
        bytes[2 * i] = static_cast<std::uint8_t>(value & 0xff);
        bytes[2 * i + 1] = static_cast<std::uint8_t>(value >> 8);
    }
    return openai::base64_encode(bytes);
}

std::int64_t audio_ms(std::size_t samples) {
    return static_cast<std::int64_t>(samples) * 1000 / 24000;
}

ProtocolResult<Item> parse_item(const json& value, const std::string& param,
                                const ItemLimits& limits) {
    if (!value.is_object()) return invalid_request(param, "must be an object");
    if (auto type = value.find("type"); type != value.end() && !type->is_null()) {
        if (!type->is_string() || type->get<std::string>() != "message") {
            return invalid_request(param + ".type",
                                   "only \"message\" items are supported (no function calls)");
        }
    }
    Item item;
    OMNI_TRY_P(item.id, string_field(value, "id", param, limits, false));
    if (item.id.size() > kMaxIdBytes) return invalid_request(param + ".id", "is too long");
    OMNI_TRY_P(item.role, string_field(value, "role", param, limits, true));
    if (item.role != "user" && item.role != "assistant" && item.role != "system") {
        return invalid_request(param + ".role", "must be user, assistant or system");
    }
    auto content = value.find("content");
    if (content == value.end() || !content->is_array()) {
        return invalid_request(param + ".content", "must be an array");
    }
    if (content->size() > limits.request.max_parts) {
        return invalid_request(param + ".content", "has too many parts");
    }
    for (std::size_t i = 0; i < content->size(); ++i) {
        OMNI_TRY_P(Part part, parse_part((*content)[i], item.role,
                                         param + ".content[" + std::to_string(i) + "]", limits));
        item.content.push_back(std::move(part));
    }
    return item;
}

json part_json(const Part& part, bool beta, bool with_audio) {
    json out = {{"type", type_name(part.type, beta)}};
    switch (part.type) {
        case PartType::input_text:
        case PartType::output_text:
            out["text"] = part.text;
            break;
        case PartType::input_audio:
            out["transcript"] = part.transcript.empty() ? json(nullptr) : json(part.transcript);
            if (with_audio) out["audio"] = base64_pcm16(part.audio);
            break;
        case PartType::output_audio:
            out["transcript"] = part.transcript;
            if (with_audio) out["audio"] = base64_pcm16(part.audio);
            break;
        case PartType::input_image:
            out["image_url"] = part.image_url;
            if (!part.detail.empty()) out["detail"] = part.detail;
            break;
    }
    return out;
}

json item_json(const Item& item, bool beta, bool with_audio) {
    json content = json::array();
    for (const auto& part : item.content) content.push_back(part_json(part, beta, with_audio));
    return {{"id", item.id},     {"object", "realtime.item"}, {"type", "message"},
            {"role", item.role}, {"status", item.status},     {"content", std::move(content)}};
}

ProtocolResult<std::vector<openai::ChatMessage>> chat_messages(const std::string& instructions,
                                                               const std::vector<Item>& items,
                                                               const ItemLimits& limits) {
    std::vector<openai::ChatMessage> messages;
    if (!instructions.empty()) {
        messages.push_back({.role = "system", .content = {{.text = instructions}}});
    }
    for (const auto& item : items) {
        openai::ChatMessage message{.role = item.role};
        for (const auto& part : item.content) {
            openai::ContentPart out;
            switch (part.type) {
                case PartType::input_text:
                case PartType::output_text:
                    if (part.text.empty()) continue;
                    out.text = part.text;
                    break;
                case PartType::output_audio:
                    if (part.transcript.empty()) continue;
                    out.text = part.transcript;
                    break;
                case PartType::input_audio: {
                    if (part.audio.empty()) continue;
                    media::AudioBuffer buffer{.sample_rate = 24000, .channels = 1, .samples = {}};
                    buffer.samples.reserve(part.audio.size());
                    for (std::int16_t s : part.audio) buffer.samples.push_back(s / 32768.0f);
                    auto wav = media::encode_audio(buffer, media::AudioFormat::wav);
                    if (!wav) {
                        return unexpected<openai::ProtocolError>(openai::ProtocolError{
                            500, wav.error().message, "server_error", "item " + item.id, ""});
                    }
                    out.type = openai::ContentPartType::audio;
                    out.media = {.kind = openai::MediaKind::audio,
                                 .source = openai::MediaSource::bytes,
                                 .mime = "audio/wav",
                                 .bytes = std::vector<std::uint8_t>(wav->begin(), wav->end())};
                    break;
                }
                case PartType::input_image: {
                    openai::MediaPolicy data_only;
                    OMNI_TRY_P(out.media, openai::resolve_media_url(
                                              part.image_url, openai::MediaKind::image, data_only,
                                              limits.request, "item " + item.id));
                    out.type = openai::ContentPartType::image;
                    out.detail = part.detail;
                    break;
                }
            }
            message.content.push_back(std::move(out));
        }
        if (!message.content.empty()) messages.push_back(std::move(message));
    }
    return messages;
}

ProtocolResult<std::string> Conversation::insert(Item item,
                                                 const std::optional<std::string>& previous_item_id,
                                                 const std::string& param) {
    if (find(item.id) != nullptr) {
        return invalid_request(param, "an item with id '" + item.id + "' already exists");
    }
    std::size_t position = items_.size();
    if (previous_item_id && !previous_item_id->empty()) {
        if (*previous_item_id == "root") {
            position = 0;
        } else {
            auto it = std::find_if(items_.begin(), items_.end(),
                                   [&](const Item& i) { return i.id == *previous_item_id; });
            if (it == items_.end()) {
                return invalid_request(param, "no item with id '" + *previous_item_id + "'");
            }
            position = static_cast<std::size_t>(it - items_.begin()) + 1;
        }
    }
    std::string previous = position == 0 ? "" : items_[position - 1].id;
    items_.insert(items_.begin() + static_cast<std::ptrdiff_t>(position), std::move(item));
    return previous;
}

Item* Conversation::find(const std::string& id) {
    auto it = std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.id == id; });
    return it == items_.end() ? nullptr : &*it;
}

bool Conversation::erase(const std::string& id) {
    auto it = std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.id == id; });
    if (it == items_.end()) return false;
    items_.erase(it);
    return true;
}

}  // namespace omnirt::serve::realtime

#include "client/output.h"

#include <array>
#include <string_view>

namespace omnirt::client {
namespace {

constexpr std::array<std::string_view, 6> kResultKeys = {"text",          "audio", "transcript",
                                                         "finish_reason", "usage", "sample_rate"};

Error bad(std::string_view where, std::string_view what) {
    return Error{ErrorCode::invalid_argument,
                 "client output: '" + std::string(where) + "' " + std::string(what)};
}

const Value* find(const Map& map, std::string_view key) {
    auto it = map.find(key);
    return it == map.end() || it->second.is_null() ? nullptr : &it->second;
}

Result<std::optional<std::string>> string_field(const Map& map, std::string_view key) {
    const Value* value = find(map, key);
    if (value == nullptr) return std::optional<std::string>{};
    if (!value->is_string()) return std::unexpected(bad(key, "must be a string"));
    return std::optional<std::string>{value->as_string()};
}

Result<std::optional<media::AudioBuffer>> audio_field(const Map& map) {
    const Value* audio = find(map, "audio");
    if (audio == nullptr) return std::optional<media::AudioBuffer>{};
    if (!audio->is_tensor()) return std::unexpected(bad("audio", "must be a tensor"));
    const Value* rate = find(map, "sample_rate");
    if (rate == nullptr || !rate->is_int() || rate->as_int() <= 0 ||
        rate->as_int() > media::kMaxSampleRate) {
        return std::unexpected(bad("sample_rate", "must be a positive integer next to 'audio'"));
    }
    auto buffer = media::audio_from_tensor(audio->as_tensor(), static_cast<int>(rate->as_int()));
    if (!buffer) return std::unexpected(bad("audio", buffer.error().message));
    return std::optional<media::AudioBuffer>{std::move(*buffer)};
}

Result<TokenUsage> usage_field(const Map& map) {
    TokenUsage usage;
    const Value* value = find(map, "usage");
    if (value == nullptr) return usage;
    if (!value->is_map()) return std::unexpected(bad("usage", "must be a map"));
    for (auto [key, field] : {std::pair{"prompt_tokens", &usage.prompt_tokens},
                              std::pair{"completion_tokens", &usage.completion_tokens}}) {
        const Value* count = find(value->as_map(), key);
        if (count == nullptr) continue;
        if (!count->is_int() || count->as_int() < 0) {
            return std::unexpected(bad(std::string("usage.") + key, "must be an integer >= 0"));
        }
        *field = count->as_int();
    }
    return usage;
}

bool looks_like_output(const Map& map) {
    for (auto key : kResultKeys) {
        if (map.contains(key)) return true;
    }
    return false;
}

Status add_part(const Map& map, FinalOutput& out) {
    OMNI_TRY(auto text, string_field(map, "text"));
    OMNI_TRY(auto transcript, string_field(map, "transcript"));
    OMNI_TRY(auto finish, string_field(map, "finish_reason"));
    OMNI_TRY(auto audio, audio_field(map));
    OMNI_TRY(TokenUsage usage, usage_field(map));
    if (text) out.text = out.text.value_or("") + *text;
    if (transcript && out.transcript.empty()) out.transcript = *transcript;
    if (finish && out.finish_reason.empty()) out.finish_reason = *finish;
    if (audio && !out.audio) out.audio = std::move(*audio);
    out.usage.prompt_tokens += usage.prompt_tokens;
    out.usage.completion_tokens += usage.completion_tokens;
    return {};
}

}  // namespace

Result<OutputDelta> parse_chunk(const Value& chunk) {
    OutputDelta delta;
    const Map* map = chunk.if_map();
    if (map == nullptr) return delta;
    OMNI_TRY(auto text, string_field(*map, "text"));
    if (text) delta.text = std::move(*text);
    OMNI_TRY(delta.audio, audio_field(*map));
    return delta;
}

Result<FinalOutput> parse_result(const Value& data) {
    FinalOutput out;
    const Map* map = data.if_map();
    if (map == nullptr) return out;
    if (looks_like_output(*map)) {
        OMNI_RETURN_IF_ERROR(add_part(*map, out));
        return out;
    }
    // {terminal stage: data}: std::map iterates in stage-name order.
    for (const auto& [stage, part] : *map) {
        const Map* part_map = part.if_map();
        if (part_map == nullptr) continue;
        if (auto added = add_part(*part_map, out); !added) {
            return std::unexpected(
                Error{added.error().code, "stage '" + stage + "': " + added.error().message});
        }
    }
    return out;
}

}  // namespace omnirt::client

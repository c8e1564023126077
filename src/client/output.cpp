#include "client/output.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

namespace omnirt::client {
namespace {

constexpr std::array<std::string_view, 7> kResultKeys = {
    "text", "audio", "transcript", "finish_reason", "usage", "sample_rate", "logprobs"};
// Bounds on what one entry may hold (a hostile stage cannot make the server build huge answers).
constexpr std::size_t kMaxTokenBytes = 1 << 16;
constexpr std::size_t kMaxTopLogprobs = 64;

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
    if (const Value* seconds = find(value->as_map(), "engine_time_s"); seconds != nullptr) {
        if (!seconds->is_number() || !std::isfinite(seconds->as_number()) ||
            seconds->as_number() < 0) {
            return std::unexpected(bad("usage.engine_time_s", "must be a finite number >= 0"));
        }
        usage.engine_seconds = seconds->as_number();
    }
    return usage;
}

Result<TokenLogprob> logprob_entry(const Value& value, const std::string& where, bool nested) {
    const Map* map = value.if_map();
    if (map == nullptr) return std::unexpected(bad(where, "must be a map"));
    TokenLogprob out;
    const Value* token = find(*map, "token");
    if (token == nullptr || !token->is_string() || token->as_string().size() > kMaxTokenBytes) {
        return std::unexpected(bad(where + ".token", "must be a string"));
    }
    out.token = token->as_string();
    const Value* logprob = find(*map, "logprob");
    if (logprob == nullptr || !logprob->is_number() || logprob->as_number() > 0) {
        return std::unexpected(bad(where + ".logprob", "must be a number <= 0"));
    }
    out.logprob = logprob->as_number();
    if (const Value* bytes = find(*map, "bytes")) {
        const List* list = bytes->if_list();
        if (list == nullptr || list->size() > kMaxTokenBytes) {
            return std::unexpected(bad(where + ".bytes", "must be a list of bytes"));
        }
        for (const Value& byte : *list) {
            const std::int64_t* b = byte.if_int();
            if (b == nullptr || *b < 0 || *b > 255) {
                return std::unexpected(bad(where + ".bytes", "must hold integers in [0, 255]"));
            }
            out.bytes.push_back(static_cast<std::uint8_t>(*b));
        }
    }
    const Value* top = find(*map, "top_logprobs");
    if (top == nullptr) return out;
    const List* list = top->if_list();
    if (nested || list == nullptr || list->size() > kMaxTopLogprobs) {
        return std::unexpected(bad(where + ".top_logprobs", "must be a list of entries"));
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
        OMNI_TRY(TokenLogprob alternative,
                 logprob_entry((*list)[i], where + ".top_logprobs[" + std::to_string(i) + "]",
                               /*nested=*/true));
        out.top.push_back(std::move(alternative));
    }
    return out;
}

Result<std::optional<std::vector<TokenLogprob>>> logprobs_field(const Map& map) {
    const Value* value = find(map, "logprobs");
    if (value == nullptr) return std::optional<std::vector<TokenLogprob>>{};
    const List* list = value->if_list();
    if (list == nullptr) return std::unexpected(bad("logprobs", "must be a list"));
    std::vector<TokenLogprob> out;
    out.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
        OMNI_TRY(TokenLogprob entry,
                 logprob_entry((*list)[i], "logprobs[" + std::to_string(i) + "]", false));
        out.push_back(std::move(entry));
    }
    return std::optional<std::vector<TokenLogprob>>{std::move(out)};
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
    OMNI_TRY(auto logprobs, logprobs_field(map));
    if (logprobs && !out.logprobs) out.logprobs = std::move(logprobs);
    if (text) out.text = out.text.value_or("") + *text;
    if (transcript && out.transcript.empty()) out.transcript = *transcript;
    if (finish && out.finish_reason.empty()) out.finish_reason = *finish;
    if (audio && !out.audio) out.audio = std::move(*audio);
    out.usage.prompt_tokens += usage.prompt_tokens;
    out.usage.completion_tokens += usage.completion_tokens;
    if (usage.engine_seconds) {
        out.usage.engine_seconds =
            std::max(out.usage.engine_seconds.value_or(0.0), *usage.engine_seconds);
    }
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
    OMNI_TRY(auto logprobs, logprobs_field(*map));
    if (logprobs) delta.logprobs = std::move(*logprobs);
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

#include "serve/openai/responses.h"

#include <nlohmann/json.hpp>

#include "serve/openai/base64.h"

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::ordered_json;

// Invalid UTF-8 from a stage is replaced, never thrown: responses must always serialise.
std::string dump(const Json& json) {
    return json.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

std::string sse(const Json& json) { return "data: " + dump(json) + "\n\n"; }

Json usage_json(const Usage& usage) {
    return Json{{"prompt_tokens", usage.prompt_tokens},
                {"completion_tokens", usage.completion_tokens},
                {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

Json logprob_json(const TokenLogprob& entry, bool with_top) {
    Json out{{"token", entry.token}, {"logprob", entry.logprob}, {"bytes", entry.bytes}};
    if (with_top) {
        Json top = Json::array();
        for (const TokenLogprob& alternative : entry.top)
            top.push_back(logprob_json(alternative, false));
        out["top_logprobs"] = std::move(top);
    }
    return out;
}

// Chat's {"content": [...]}, or null.
Json chat_logprobs(const std::optional<std::vector<TokenLogprob>>& logprobs) {
    if (!logprobs) return nullptr;
    Json content = Json::array();
    for (const TokenLogprob& entry : *logprobs) content.push_back(logprob_json(entry, true));
    return Json{{"content", std::move(content)}};
}

// Characters (code points) of UTF-8 text: what text_offset counts, as in Python's len(). Counted
// over a token's bytes (lead bytes only), a character split across tokens counts once, where the
// token strings would count a U+FFFD per piece.
template <class Bytes>
std::int64_t code_points(const Bytes& bytes) {
    std::int64_t count = 0;
    for (auto c : bytes) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    return count;
}

// The completions API's four parallel arrays, or null.
Json completion_logprobs(const std::optional<std::vector<TokenLogprob>>& logprobs,
                         std::int64_t text_offset) {
    if (!logprobs) return nullptr;
    Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(),
         offsets = Json::array();
    for (const TokenLogprob& entry : *logprobs) {
        tokens.push_back(entry.token);
        token_logprobs.push_back(entry.logprob);
        Json alternatives = Json::object();
        for (const TokenLogprob& alternative : entry.top) {
            // Two alternatives may read the same (partial characters); the likelier one stays.
            if (!alternatives.contains(alternative.token))
                alternatives[alternative.token] = alternative.logprob;
        }
        top.push_back(std::move(alternatives));
        offsets.push_back(text_offset);
        text_offset += entry.bytes.empty() ? code_points(entry.token) : code_points(entry.bytes);
    }
    return Json{{"tokens", std::move(tokens)},
                {"token_logprobs", std::move(token_logprobs)},
                {"top_logprobs", std::move(top)},
                {"text_offset", std::move(offsets)}};
}

Json chunk(const ChunkContext& context, Json delta, const Json& finish_reason,
           Json logprobs = nullptr) {
    Json out{{"id", context.id},
             {"object", "chat.completion.chunk"},
             {"created", context.created},
             {"model", context.model},
             {"choices", Json::array({Json{{"index", 0},
                                           {"delta", std::move(delta)},
                                           {"logprobs", std::move(logprobs)},
                                           {"finish_reason", finish_reason}}})}};
    if (context.include_usage) out["usage"] = nullptr;
    return out;
}

Json nullable(const std::string& text) { return text.empty() ? Json(nullptr) : Json(text); }

std::string hex_id(std::string_view prefix, std::uint64_t seed) {
    // Two rounds of splitmix64 give 128 bits; 24 hex digits are kept.
    auto mix = [](std::uint64_t x) {
        x += 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    };
    const std::uint64_t high = mix(seed);
    const std::uint64_t low = mix(high ^ seed);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out(prefix);
    for (int i = 15; i >= 0; --i) out.push_back(kHex[(high >> (i * 4)) & 15]);
    for (int i = 15; i >= 8; --i) out.push_back(kHex[(low >> (i * 4)) & 15]);
    return out;
}

}  // namespace

std::string completion_id(std::uint64_t seed) { return hex_id("chatcmpl-", seed); }
std::string audio_id(std::uint64_t seed) { return hex_id("audio_", seed); }
std::string text_completion_id(std::uint64_t seed) { return hex_id("cmpl-", seed); }

std::string chat_completion_json(const ChatCompletion& completion) {
    Json message{{"role", "assistant"},
                 {"content", completion.content ? Json(*completion.content) : Json(nullptr)},
                 {"refusal", nullptr}};
    if (completion.audio) {
        const AudioOutput& audio = *completion.audio;
        message["audio"] = Json{{"id", audio.id},
                                {"data", base64_encode(audio.data)},
                                {"expires_at", audio.expires_at},
                                {"transcript", audio.transcript}};
    }
    const Json out{{"id", completion.id},
                   {"object", "chat.completion"},
                   {"created", completion.created},
                   {"model", completion.model},
                   {"choices", Json::array({Json{{"index", 0},
                                                 {"message", std::move(message)},
                                                 {"logprobs", chat_logprobs(completion.logprobs)},
                                                 {"finish_reason", completion.finish_reason}}})},
                   {"usage", usage_json(completion.usage)}};
    return dump(out);
}

std::string chat_chunk_role(const ChunkContext& context) {
    return sse(chunk(context, Json{{"role", "assistant"}, {"content", ""}}, nullptr));
}

std::string chat_chunk_content(const ChunkContext& context, std::string_view text,
                               const std::optional<std::vector<TokenLogprob>>& logprobs) {
    return sse(
        chunk(context, Json{{"content", std::string(text)}}, nullptr, chat_logprobs(logprobs)));
}

std::string chat_chunk_audio(const ChunkContext& context, std::string_view audio_id,
                             std::span<const std::uint8_t> data, std::string_view transcript,
                             std::optional<std::int64_t> expires_at) {
    Json audio{{"id", std::string(audio_id)}, {"data", base64_encode(data)}};
    if (!transcript.empty()) audio["transcript"] = std::string(transcript);
    if (expires_at) audio["expires_at"] = *expires_at;
    return sse(chunk(context, Json{{"audio", std::move(audio)}}, nullptr));
}

std::string chat_chunk_finish(const ChunkContext& context, std::string_view finish_reason) {
    return sse(chunk(context, Json::object(), std::string(finish_reason)));
}

std::string chat_chunk_usage(const ChunkContext& context, const Usage& usage) {
    return sse(Json{{"id", context.id},
                    {"object", "chat.completion.chunk"},
                    {"created", context.created},
                    {"model", context.model},
                    {"choices", Json::array()},
                    {"usage", usage_json(usage)}});
}

std::string sse_done() { return "data: [DONE]\n\n"; }

namespace {
Json completion_object(const std::string& id, std::int64_t created, const std::string& model,
                       Json choice) {
    return Json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", Json::array({std::move(choice)})}};
}
}  // namespace

std::string text_completion_json(const TextCompletion& completion) {
    Json out = completion_object(completion.id, completion.created, completion.model,
                                 Json{{"index", 0},
                                      {"text", completion.text},
                                      {"logprobs", completion_logprobs(completion.logprobs, 0)},
                                      {"finish_reason", completion.finish_reason}});
    out["usage"] = usage_json(completion.usage);
    return dump(out);
}

std::string text_completion_chunk(const ChunkContext& context, std::string_view text,
                                  const std::optional<std::vector<TokenLogprob>>& logprobs,
                                  std::int64_t text_offset) {
    Json out = completion_object(context.id, context.created, context.model,
                                 Json{{"index", 0},
                                      {"text", std::string(text)},
                                      {"logprobs", completion_logprobs(logprobs, text_offset)},
                                      {"finish_reason", nullptr}});
    if (context.include_usage) out["usage"] = nullptr;
    return sse(out);
}

std::string text_completion_finish(const ChunkContext& context, std::string_view finish_reason) {
    Json out = completion_object(context.id, context.created, context.model,
                                 Json{{"index", 0},
                                      {"text", ""},
                                      {"logprobs", nullptr},
                                      {"finish_reason", std::string(finish_reason)}});
    if (context.include_usage) out["usage"] = nullptr;
    return sse(out);
}

std::string text_completion_usage(const ChunkContext& context, const Usage& usage) {
    Json out = completion_object(context.id, context.created, context.model, nullptr);
    out["choices"] = Json::array();
    out["usage"] = usage_json(usage);
    return sse(out);
}

std::string speech_audio_delta_event(std::span<const std::uint8_t> audio) {
    return sse(Json{{"type", "speech.audio.delta"}, {"audio", base64_encode(audio)}});
}

std::string sglang_speech_chunk_event(std::string_view id, std::int64_t index,
                                      std::span<const std::uint8_t> file, std::string_view format,
                                      std::string_view mime_type, int sample_rate) {
    return sse(Json{{"id", id},
                    {"object", "audio.speech.chunk"},
                    {"index", index},
                    {"audio", Json{{"data", base64_encode(file)},
                                   {"format", format},
                                   {"mime_type", mime_type},
                                   {"sample_rate", sample_rate}}},
                    {"finish_reason", nullptr}});
}

std::string sglang_speech_done_event(std::string_view id, std::int64_t index, const Usage& usage,
                                     double engine_seconds) {
    return sse(Json{{"id", id},
                    {"object", "audio.speech.chunk"},
                    {"index", index},
                    {"audio", nullptr},
                    {"finish_reason", "stop"},
                    {"usage", Json{{"prompt_tokens", usage.prompt_tokens},
                                   {"completion_tokens", usage.completion_tokens},
                                   {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
                                   {"engine_time_s", engine_seconds}}}}) +
           sse_done();
}

std::string speech_audio_done_event(const Usage& usage) {
    return sse(
        Json{{"type", "speech.audio.done"},
             {"usage", Json{{"input_tokens", usage.prompt_tokens},
                            {"output_tokens", usage.completion_tokens},
                            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}}});
}

namespace {
Json error_object(const ProtocolError& error) {
    return Json{{"error", Json{{"message", error.message},
                               {"type", error.type},
                               {"param", nullable(error.param)},
                               {"code", nullable(error.code)}}}};
}
}  // namespace

std::string error_json(const ProtocolError& error) { return dump(error_object(error)); }
std::string error_event(const ProtocolError& error) { return sse(error_object(error)); }

std::string models_json(std::span<const ModelCard> models) {
    Json data = Json::array();
    for (const auto& model : models) {
        data.push_back(Json{{"id", model.id},
                            {"object", "model"},
                            {"created", model.created},
                            {"owned_by", model.owned_by}});
    }
    return dump(Json{{"object", "list"}, {"data", std::move(data)}});
}

}  // namespace omnirt::serve::openai

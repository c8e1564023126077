#pragma once
// OpenAI response bodies and SSE events. Strings are complete wire text: JSON bodies without a
// trailing newline; SSE events as "data: <json>\n\n".
//
// chat.completion:
//   {"id", "object": "chat.completion", "created", "model", "choices": [{"index": 0,
//    "message": {"role": "assistant", "content": str|null, "refusal": null,
//                "audio"?: {"id", "data", "expires_at", "transcript"}},
//    "logprobs": null | {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
//    "logprob", "bytes"}...]}...]}, "finish_reason"}], "usage": {"prompt_tokens",
//    "completion_tokens", "total_tokens"}}
// chat.completion.chunk (one choice; "usage": null on every chunk when include_usage):
//   first {"delta": {"role": "assistant", "content": ""}}, then {"delta": {"content"},
//   "logprobs": null | {"content": [...]}} /
//   {"delta": {"audio": {"id", "data", "transcript"?, "expires_at"?}}}, then {"delta": {},
//   "finish_reason"}, then (include_usage) {"choices": [], "usage": {...}}, then "data: [DONE]".
// text_completion (POST /v1/completions):
//   {"id": "cmpl-...", "object": "text_completion", "created", "model", "choices": [{"index": 0,
//    "text", "logprobs": null | {"tokens": [str], "token_logprobs": [float], "top_logprobs":
//    [{token: logprob}], "text_offset": [int]}, "finish_reason"}], "usage": {...}}
//   streamed: the same object per delta with "finish_reason": null, then one with the
//   finish_reason and empty text, then (include_usage) {"choices": [], "usage"}, then [DONE].
// audio/speech SSE: {"type": "speech.audio.delta", "audio": base64} ... then
//   {"type": "speech.audio.done", "usage": {"input_tokens", "output_tokens", "total_tokens"}}.
//   SGLang-Omni's form: {"id", "object": "audio.speech.chunk", "index", "audio": {"data":
//   base64 of a whole file, "format", "mime_type", "sample_rate"}, "finish_reason": null} ...,
//   then {"id", "object", "index", "audio": null, "finish_reason": "stop", "usage":
//   {"prompt_tokens", "completion_tokens", "total_tokens", "engine_time_s"}}, then [DONE].
// error: {"error": {"message", "type", "param": str|null, "code": str|null}}
// models: {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}
//
// Thread safety: pure functions.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serve/openai/protocol_error.h"

namespace omnirt::serve::openai {

struct Usage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0;
};

struct AudioOutput {
    std::string id;                  // "audio_..."
    std::vector<std::uint8_t> data;  // encoded audio (base64-encoded on the wire)
    std::int64_t expires_at = 0;     // unix seconds
    std::string transcript;
};

// The log probability of one output token and of the most likely alternatives at its step.
struct TokenLogprob {
    std::string token;
    double logprob = 0;
    std::vector<std::uint8_t> bytes;
    std::vector<TokenLogprob> top;  // most likely first
};

struct ChatCompletion {
    std::string id;  // "chatcmpl-..." (see completion_id)
    std::int64_t created = 0;
    std::string model;
    std::optional<std::string> content;  // null when the reply has no text
    std::optional<AudioOutput> audio;
    std::string finish_reason = "stop";  // stop, length, content_filter, tool_calls
    Usage usage;
    std::optional<std::vector<TokenLogprob>> logprobs;  // null on the wire when absent
};

// "chatcmpl-" / "audio_" followed by 24 lowercase hex digits derived from `seed` (the server
// passes a random or unique number; this layer has no randomness).
[[nodiscard]] std::string completion_id(std::uint64_t seed);
[[nodiscard]] std::string audio_id(std::uint64_t seed);
[[nodiscard]] std::string text_completion_id(std::uint64_t seed);  // "cmpl-..."

[[nodiscard]] std::string chat_completion_json(const ChatCompletion& completion);

struct ChunkContext {
    std::string id;
    std::int64_t created = 0;
    std::string model;
    bool include_usage = false;  // adds "usage": null to every chunk but the usage chunk
};

[[nodiscard]] std::string chat_chunk_role(const ChunkContext& context);
// A text delta; with `logprobs` (possibly for a token that adds no text yet) the choice carries
// {"content": [...]} instead of null.
[[nodiscard]] std::string chat_chunk_content(
    const ChunkContext& context, std::string_view text,
    const std::optional<std::vector<TokenLogprob>>& logprobs = std::nullopt);
// An audio delta: `data` base64-encoded; transcript / expires_at only when set.
[[nodiscard]] std::string chat_chunk_audio(const ChunkContext& context, std::string_view audio_id,
                                           std::span<const std::uint8_t> data,
                                           std::string_view transcript = {},
                                           std::optional<std::int64_t> expires_at = {});
[[nodiscard]] std::string chat_chunk_finish(const ChunkContext& context,
                                            std::string_view finish_reason);
[[nodiscard]] std::string chat_chunk_usage(const ChunkContext& context, const Usage& usage);
[[nodiscard]] std::string sse_done();  // "data: [DONE]\n\n"

// Completions: `text_offset` of a token counts the characters (code points) of the output
// before it.
struct TextCompletion {
    std::string id;
    std::int64_t created = 0;
    std::string model;
    std::string text;
    std::string finish_reason = "stop";
    Usage usage;
    std::optional<std::vector<TokenLogprob>> logprobs;
};
[[nodiscard]] std::string text_completion_json(const TextCompletion& completion);
// One streamed delta; `text_offset` is where this delta's first token starts in the output
// (characters).
[[nodiscard]] std::string text_completion_chunk(
    const ChunkContext& context, std::string_view text,
    const std::optional<std::vector<TokenLogprob>>& logprobs, std::int64_t text_offset);
[[nodiscard]] std::string text_completion_finish(const ChunkContext& context,
                                                 std::string_view finish_reason);
[[nodiscard]] std::string text_completion_usage(const ChunkContext& context, const Usage& usage);

[[nodiscard]] std::string speech_audio_delta_event(std::span<const std::uint8_t> audio);
[[nodiscard]] std::string speech_audio_done_event(const Usage& usage);
[[nodiscard]] std::string sglang_speech_chunk_event(std::string_view id, std::int64_t index,
                                                    std::span<const std::uint8_t> file,
                                                    std::string_view format,
                                                    std::string_view mime_type, int sample_rate);
[[nodiscard]] std::string sglang_speech_done_event(std::string_view id, std::int64_t index,
                                                   const Usage& usage, double engine_seconds);

[[nodiscard]] std::string error_json(const ProtocolError& error);
// An error as an SSE event, for failures after a stream has started: "data: {"error":...}\n\n".
[[nodiscard]] std::string error_event(const ProtocolError& error);

struct ModelCard {
    std::string id;
    std::int64_t created = 0;
    std::string owned_by = "omnirt";
};
[[nodiscard]] std::string models_json(std::span<const ModelCard> models);

}  // namespace omnirt::serve::openai

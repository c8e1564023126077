#pragma once
// POST /v1/chat/completions: decoding and validation of the body into ChatRequest, and its
// mapping onto the pipeline's OmniRequest (layout in docs/serve_openai.md).
//
// Unknown fields are ignored (OpenAI clients send extras); null counts as absent for optional
// fields; a present field of the wrong type or out of range is a 400 whose `param` is the field
// path. Everything is bounded by RequestLimits; media references follow media.h.
//
// Thread safety: pure functions (media resolution reads the file system, see media.h).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/request.h"
#include "serve/openai/limits.h"
#include "serve/openai/media.h"
#include "serve/openai/protocol_error.h"
#include "serve/openai/sampling.h"

namespace omnirt::serve::openai {

enum class ContentPartType : std::uint8_t { text, image, audio, video };

struct ContentPart {
    ContentPartType type = ContentPartType::text;
    std::string text;    // type == text
    MediaInput media;    // other types
    std::string detail;  // image_url.detail: "", "auto", "low" or "high"
    friend bool operator==(const ContentPart&, const ContentPart&) = default;
};

struct ChatMessage {
    std::string role;  // system, developer (treated as system), user, assistant, tool
    // A string content becomes one text part; null content (assistant with tool calls) none.
    std::vector<ContentPart> content;
    std::string name;          // optional
    std::string tool_call_id;  // role == tool
    friend bool operator==(const ChatMessage&, const ChatMessage&) = default;
};

struct ChatRequest {
    std::string model;
    std::vector<ChatMessage> messages;            // at least one
    std::vector<std::string> modalities{"text"};  // subset of {text, audio}, no duplicates
    std::string audio_voice;                      // audio.voice ("" -> the stage's default)
    std::string audio_format = "wav";             // audio.format: wav, pcm16, flac, opus, mp3
    SamplingParams sampling;
    std::optional<std::int64_t> max_tokens;  // max_completion_tokens, else max_tokens
    std::vector<std::string> stop;           // a string becomes one entry
    bool stream = false;
    bool include_usage = false;                // stream_options.include_usage
    bool logprobs = false;                     // log probabilities of the output tokens
    std::optional<std::int64_t> top_logprobs;  // [0, 20] alternatives per token; needs logprobs
    std::map<std::string, SamplingParams> stage_sampling;
    std::map<std::string, Value> stage_params;  // each value is a map
    std::string user;  // the client's end-user id: keeps its requests on one stage replica
    friend bool operator==(const ChatRequest&, const ChatRequest&) = default;

    [[nodiscard]] bool wants_audio() const;
};

[[nodiscard]] ProtocolResult<ChatRequest> parse_chat_request(std::string_view body,
                                                             const RequestLimits& limits,
                                                             const MediaPolicy& media);

// inputs {"messages": [{"role", "content": [part...], "name"?, "tool_call_id"?}...],
//         "modalities": [...], "audio": {"voice", "format"}}
//   text part  {"type": "text", "text"}
//   media part {"type": "image"|"audio"|"video", "mime", "source": "bytes"|"path"|"remote_url",
//               "data": Bytes | "path": str | "url": str, "detail"? (images)}
// params {"sampling": {..., "logprobs"?: true, "top_logprobs"?: n}, "stage_sampling": {stage:
// {...}}, "stage_params": {stage: {...}},
//         "max_tokens"?, "stop": [...], "seed"?, "stream": bool}
// metadata {"api": "chat.completions", "model", "user"? (when the request names one)}
[[nodiscard]] OmniRequest to_omni_request(const ChatRequest& request);

// Shared with the speech decoder: stage_sampling / stage_params (absent -> empty).
struct StageOverrides {
    std::map<std::string, SamplingParams> sampling;
    std::map<std::string, Value> params;
};
[[nodiscard]] ProtocolResult<StageOverrides> parse_stage_overrides(const nlohmann::json& body,
                                                                   const RequestLimits& limits);
void put_stage_overrides(const std::map<std::string, SamplingParams>& sampling,
                         const std::map<std::string, Value>& params, Map& out);

}  // namespace omnirt::serve::openai

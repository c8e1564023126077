#pragma once
// POST /v1/audio/speech: decoding and validation into SpeechRequest, and its OmniRequest.
//
// Fields: model (required), input (required, non-empty, at most
// RequestLimits::max_speech_input_chars code points), voice (optional string), instructions
// (optional string), response_format (wav, pcm, flac, opus, mp3, aac; default wav; anything
// else is a 400 naming 'response_format'), speed [0.25, 4.0] (default 1.0), stream (bool) or
// stream_format ("sse" streams SSE events, "audio" the raw audio bytes; stream_format wins
// over stream), the sampling fields of sampling.h, max_tokens (or SGLang-Omni's
// max_new_tokens when max_tokens is absent),
// stage_sampling and stage_params as in chat, reference voices (`references`, or `ref_audio` /
// `ref_text`: speech_references.h). Unknown fields are ignored.
//
// Thread safety: pure functions.
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/request.h"
#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"
#include "serve/openai/sampling.h"
#include "serve/openai/speech_references.h"

namespace omnirt::serve::openai {

struct SpeechRequest {
    std::string model;
    std::string input;
    std::string voice;  // "" -> the stage's default
    std::string instructions;
    std::string response_format = "wav";
    double speed = 1.0;
    bool stream = false;  // SSE: speech.audio.delta events, then speech.audio.done
    // stream_format "audio": the encoded audio bytes as they are made, in one chunked response
    // (no SSE; wav with a streaming header, pcm raw; flac / opus / mp3 come whole at the end).
    bool stream_audio = false;
    SamplingParams sampling;
    std::optional<std::int64_t> max_tokens;
    std::map<std::string, SamplingParams> stage_sampling;
    std::map<std::string, Value> stage_params;
    std::vector<SpeechReference> references;
    bool legacy_reference = false;  // `references` holds the one of ref_audio / ref_text
    friend bool operator==(const SpeechRequest&, const SpeechRequest&) = default;
};

// `media`: where reference audio may come from (media.h); the default allows base64 only.
[[nodiscard]] ProtocolResult<SpeechRequest> parse_speech_request(std::string_view body,
                                                                 const RequestLimits& limits,
                                                                 const MediaPolicy& media = {});

// inputs {"text", "voice", "instructions", "response_format", "speed", "references"?
//         (speech_references.h; only when the request names references)}
// params {"sampling", "stage_sampling", "stage_params", "max_tokens"?, "seed"?, "stream"}
// metadata {"api": "audio.speech", "model"}
[[nodiscard]] OmniRequest to_omni_request(const SpeechRequest& request);

// The Content-Type of a non-streamed response_format: audio/wav, audio/pcm, audio/flac,
// audio/ogg (opus), audio/mpeg; "application/octet-stream" for anything else.
[[nodiscard]] std::string_view speech_content_type(std::string_view response_format);

}  // namespace omnirt::serve::openai

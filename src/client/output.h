#pragma once
// The client output protocol: how stages address the end user. Stage-independent, so the server
// (and any other front end) turns any pipeline's output into text and audio without knowing its
// stages (docs/serve.md, "Client output protocol").
//
// A client stream chunk is a map; the keys a client reads are
//   "text": string                       a text delta
//   "audio": tensor, "sample_rate": int  an audio delta (float / int16 samples, [n] or [c, n])
//   "logprobs": [entry...]               log probabilities of the tokens of this delta, where
//       entry = {"token": str, "logprob": number, "bytes": [int 0..255...],
//                "top_logprobs": [{"token", "logprob", "bytes"}...]}  (top_logprobs optional)
// Other keys are ignored. A final result (the request's merged data) is either one map with the
// keys below, or, with several terminal stages, {terminal stage: map}; the maps are combined in
// stage-name order (text is concatenated, the first audio wins, usage is summed):
//   "text": string, "audio": tensor, "sample_rate": int, "transcript": string,
//   "finish_reason": string, "usage": {"prompt_tokens": int, "completion_tokens": int,
//   "engine_time_s": number >= 0 (optional; the largest wins)},
//   "logprobs": [entry...] (the first stage's that has them wins)
//
// Thread safety: pure functions.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "media/audio.h"

namespace omnirt::client {

struct TokenUsage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0;
    // usage.engine_time_s: the seconds an AR stage spent on the request (ArScheduler adds it);
    // with several terminal stages the largest. Absent when no stage reported it.
    std::optional<double> engine_seconds;
};

// The log probability of one output token, and of the most likely alternatives at its step.
struct TokenLogprob {
    std::string token;  // the token's text (U+FFFD for a partial character)
    double logprob = 0;
    std::vector<std::uint8_t> bytes;  // the token's exact bytes
    std::vector<TokenLogprob> top;    // most likely first; empty when not asked for
    friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct OutputDelta {
    std::string text;                         // "" when the chunk has no text
    std::optional<media::AudioBuffer> audio;  // set when the chunk has audio
    std::vector<TokenLogprob> logprobs;       // empty when the chunk has none
    [[nodiscard]] bool empty() const { return text.empty() && !audio && logprobs.empty(); }
};

struct FinalOutput {
    std::optional<std::string> text;  // absent when no terminal stage produced text
    std::optional<media::AudioBuffer> audio;
    std::string transcript;     // "" when absent
    std::string finish_reason;  // "" when absent
    TokenUsage usage;
    std::optional<std::vector<TokenLogprob>> logprobs;  // absent when no stage sent them
};

// invalid_argument naming the key when a known key has the wrong type (e.g. "audio" without a
// positive "sample_rate", or not a host tensor of a sample dtype).
[[nodiscard]] Result<OutputDelta> parse_chunk(const Value& chunk);
[[nodiscard]] Result<FinalOutput> parse_result(const Value& data);

}  // namespace omnirt::client

#pragma once
// The client output protocol: how stages address the end user. Stage-independent, so the server
// (and any other front end) turns any pipeline's output into text and audio without knowing its
// stages (docs/serve.md, "Client output protocol").
//
// A client stream chunk is a map; the keys a client reads are
//   "text": string                       a text delta
//   "audio": tensor, "sample_rate": int  an audio delta (float / int16 samples, [n] or [c, n])
// Other keys are ignored. A final result (the request's merged data) is either one map with the
// keys below, or, with several terminal stages, {terminal stage: map}; the maps are combined in
// stage-name order (text is concatenated, the first audio wins, usage is summed):
//   "text": string, "audio": tensor, "sample_rate": int, "transcript": string,
//   "finish_reason": string, "usage": {"prompt_tokens": int, "completion_tokens": int}
//
// Thread safety: pure functions.
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/value.h"
#include "media/audio.h"

namespace omnirt::client {

struct TokenUsage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0;
};

struct OutputDelta {
    std::string text;                         // "" when the chunk has no text
    std::optional<media::AudioBuffer> audio;  // set when the chunk has audio
    [[nodiscard]] bool empty() const { return text.empty() && !audio; }
};

struct FinalOutput {
    std::optional<std::string> text;  // absent when no terminal stage produced text
    std::optional<media::AudioBuffer> audio;
    std::string transcript;     // "" when absent
    std::string finish_reason;  // "" when absent
    TokenUsage usage;
};

// invalid_argument naming the key when a known key has the wrong type (e.g. "audio" without a
// positive "sample_rate", or not a host tensor of a sample dtype).
[[nodiscard]] Result<OutputDelta> parse_chunk(const Value& chunk);
[[nodiscard]] Result<FinalOutput> parse_result(const Value& data);

}  // namespace omnirt::client

#pragma once
// POST /v1/completions (the legacy text completions API): decoding and validation of the body,
// and its mapping onto the pipeline's OmniRequest (docs/serve_openai.md, "Completions").
//
// One prompt per request: a string, an array of token ids, or an array holding one of those.
// Several prompts, n > 1, best_of > 1, echo and suffix are refused with a 400 naming the field
// (this server generates one choice per request). logprobs is an int in [0, 20]: the chosen
// token's log probability and that many alternatives. max_tokens defaults to 16, as in OpenAI.
// The rest follows chat_request.h (unknown fields ignored, null = absent).
//
// Thread safety: pure functions.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/request.h"
#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"
#include "serve/openai/sampling.h"

namespace omnirt::serve::openai {

inline constexpr std::int64_t kDefaultCompletionMaxTokens = 16;

struct CompletionRequest {
    std::string model;
    std::variant<std::string, std::vector<std::int64_t>> prompt;
    SamplingParams sampling;
    std::int64_t max_tokens = kDefaultCompletionMaxTokens;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;
    std::optional<std::int64_t> logprobs;  // alternatives per token; absent = no log probabilities
    std::map<std::string, SamplingParams> stage_sampling;
    std::map<std::string, Value> stage_params;
    friend bool operator==(const CompletionRequest&, const CompletionRequest&) = default;
};

[[nodiscard]] ProtocolResult<CompletionRequest> parse_completion_request(
    std::string_view body, const RequestLimits& limits);

// inputs {"prompt": str | [int...]}
// params {"sampling": {..., "logprobs"?: true, "top_logprobs"?: n}, "stage_sampling",
//         "stage_params", "max_tokens", "stop": [...], "seed"?, "stream": bool}
// metadata {"api": "completions", "model"}
[[nodiscard]] OmniRequest to_omni_request(const CompletionRequest& request);

}  // namespace omnirt::serve::openai

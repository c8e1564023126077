#pragma once
// Request fields shared by the generation endpoints (chat completions, completions): stop,
// max_tokens, stream / stream_options, and optional sub-objects. Errors name the field path.
//
// Thread safety: pure functions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::openai {

// The most alternatives a request may ask for per token (chat top_logprobs, completions logprobs).
inline constexpr std::int64_t kMaxTopLogprobs = 20;

// `stop`: a string (one entry) or an array of at most limits.max_stop_sequences strings.
[[nodiscard]] ProtocolResult<std::vector<std::string>> parse_stop(const nlohmann::json& body,
                                                                  const RequestLimits& limits);

// max_completion_tokens, else max_tokens, each in [1, limits.max_tokens]; both present must agree.
[[nodiscard]] ProtocolResult<std::optional<std::int64_t>> parse_max_tokens(
    const nlohmann::json& body, const RequestLimits& limits);

// body[key] when it is an object; nullptr when absent or null; 400 for another type.
[[nodiscard]] ProtocolResult<const nlohmann::json*> optional_object(const nlohmann::json& body,
                                                                    std::string_view key,
                                                                    std::string_view parent);

struct StreamFields {
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage (only with stream)
};
[[nodiscard]] ProtocolResult<StreamFields> parse_stream_fields(const nlohmann::json& body);

}  // namespace omnirt::serve::openai

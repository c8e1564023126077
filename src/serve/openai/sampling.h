#pragma once
// Sampling fields shared by chat completions, speech and stage_sampling entries.
//
// Ranges (a value outside is a 400 naming the field): temperature [0, 2], top_p (0, 1],
// top_k -1 or >= 0 (-1 and 0 disable it), min_p [0, 1], presence_penalty and frequency_penalty
// [-2, 2], repetition_penalty (0, 10], seed any int64; the vLLM extras min_tokens >= 0,
// ignore_eos (bool) and stop_token_ids (at most 1024 ids >= 0). Absent or null fields
// stay unset and are left out of the Value, so stages apply their own defaults.
//
// Thread safety: pure functions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::openai {

struct SamplingParams {
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::optional<std::int64_t> top_k;
    std::optional<double> min_p;
    std::optional<double> presence_penalty;
    std::optional<double> frequency_penalty;
    std::optional<double> repetition_penalty;
    std::optional<std::int64_t> seed;
    std::optional<std::int64_t> min_tokens;
    std::optional<bool> ignore_eos;
    std::optional<std::vector<std::int64_t>> stop_token_ids;
    // Per stage only (stage_sampling.<stage>.max_tokens: e.g. the talker's frames); the top
    // level's max_tokens is the request's.
    std::optional<std::int64_t> max_tokens;
    friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
};

// Reads the sampling fields of `object` (other fields are ignored); `parent` prefixes error
// paths ("" at top level, "stage_sampling.talker" for a stage entry).
[[nodiscard]] ProtocolResult<SamplingParams> parse_sampling(const nlohmann::json& object,
                                                            std::string_view parent);
// The set fields as a map: {"temperature": 0.7, "top_k": 20, ...}; floats stay floats, top_k
// and seed are ints, stop_token_ids a list of ints.
[[nodiscard]] Value sampling_to_value(const SamplingParams& sampling);

}  // namespace omnirt::serve::openai

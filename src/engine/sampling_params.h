#pragma once
// Per-request sampling parameters of the AR engine, as read from a request's params, and the
// per-request sampling state (random generator, token history for the penalties). The batched
// Sampler that applies them to logits is in sampling.h (libtorch); this header is torch-free.
//
// Where the parameters come from (docs/engine.md, "Sampling"), for stage `S`, field by field,
// later layers winning:
//   1. the stage defaults (factory args, the model's generation config);
//   2. the top-level params.max_tokens, params.stop and params.seed (the OpenAI layer's);
//   3. params.sampling;
//   4. params.stage_sampling.S.
// A null field counts as absent. A stage whose parameters are its own (a talker: the client's
// max_tokens, stop strings and sampling are the text's) reads only 1, params.seed and 4
// (SamplingLayers::own).
//
// Thread safety: SamplingParams is a value; a SamplingState belongs to one request and is used
// by the engine thread only.
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/value.h"

namespace omnirt::engine {

inline constexpr std::int64_t kMaxTopLogprobs = 20;
inline constexpr std::size_t kMaxStopStrings = 64;
inline constexpr std::size_t kMaxStopTokenIds = 1024;
// Temperatures below this sample greedily (as in vLLM): dividing by them overflows.
inline constexpr double kGreedyTemperature = 1e-5;

struct SamplingParams {
    double temperature = 1.0;                // 0 (below kGreedyTemperature) = greedy (argmax)
    double top_p = 1.0;                      // (0, 1]; 1 = off
    std::int64_t top_k = 0;                  // 0 (or -1 in requests) = off
    double min_p = 0.0;                      // [0, 1]; 0 = off
    double repetition_penalty = 1.0;         // > 0; 1 = off. Tokens of prompt or output.
    double presence_penalty = 0.0;           // [-2, 2]; output tokens
    double frequency_penalty = 0.0;          // [-2, 2]; output token counts
    std::optional<std::uint64_t> seed;       // none: a random seed per request
    std::optional<std::int64_t> max_tokens;  // none: up to the context / KV capacity
    std::int64_t min_tokens = 0;    // EOS and stop token ids are banned before this many tokens
    std::vector<std::string> stop;  // stop strings (empty strings dropped)
    std::vector<std::int32_t> stop_token_ids;
    bool ignore_eos = false;
    // Log probabilities: none = off; n = the chosen token's and the n most likely tokens'.
    std::optional<std::int64_t> logprobs;

    [[nodiscard]] bool greedy() const { return temperature < kGreedyTemperature; }
    [[nodiscard]] bool has_penalties() const {
        return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0;
    }
    friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
};

// Reads the fields of one layer (a map of the keys of SamplingParams, as the OpenAI layer
// writes them: top_k -1 = off; logprobs a bool or an int, top_logprobs an int) onto `params`.
// `where` names the layer in errors ("params.sampling"). invalid_argument naming the field for
// a wrong type or a value out of range; unknown keys are ignored.
[[nodiscard]] Status apply_sampling_layer(const Value& layer, std::string_view where,
                                          SamplingParams& params);

// The parameters of a request for stage `stage_name`: `defaults` (the stage's, e.g. from its
// generation config), overlaid as described at the top of this file. `params` is the request's
// params map (OmniRequest::params; null is treated as empty).
enum class SamplingLayers : std::uint8_t {
    all,  // the stage defaults, params.{max_tokens, stop, seed}, params.sampling, stage_sampling
    own,  // the stage defaults, params.seed and params.stage_sampling.<stage> only
};
[[nodiscard]] Result<SamplingParams> parse_sampling_params(
    const Value& params, std::string_view stage_name, const SamplingParams& defaults = {},
    SamplingLayers layers = SamplingLayers::all);

// The per-request state the Sampler needs across steps. The random stream is a 64-bit
// Mersenne Twister seeded with params.seed (or `fallback_seed`) and is consumed once per sampled
// (non-greedy) step, so the tokens of a seeded request do not depend on what else is batched
// with it, nor on preemption.
class SamplingState {
  public:
    SamplingState(SamplingParams params, std::uint64_t fallback_seed);

    [[nodiscard]] const SamplingParams& params() const { return params_; }
    // The prompt counts for the repetition penalty only. Call once, before any output.
    void add_prompt(std::span<const std::int32_t> tokens);
    void add_output(std::int32_t token);
    [[nodiscard]] std::int64_t output_count() const { return output_count_; }
    // Distinct tokens of prompt and output, in first-seen order (repetition penalty).
    [[nodiscard]] const std::vector<std::int32_t>& seen_tokens() const { return seen_order_; }
    // Distinct output tokens with their counts (presence and frequency penalties).
    [[nodiscard]] const std::vector<std::pair<std::int32_t, std::int32_t>>& output_counts() const {
        return output_counts_;
    }
    // A uniform double in [0, 1) from the request's stream.
    [[nodiscard]] double next_uniform();

  private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::int64_t output_count_ = 0;
    std::unordered_set<std::int32_t> seen_;  // tokens of prompt or output
    std::vector<std::int32_t> seen_order_;
    std::unordered_map<std::int32_t, std::size_t> output_index_;  // token -> output_counts_ slot
    std::vector<std::pair<std::int32_t, std::int32_t>> output_counts_;
};

}  // namespace omnirt::engine

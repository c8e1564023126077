#pragma once
// The batched Sampler of the AR engine: one token per row of a logits batch, each row with its
// own request's parameters and random stream (sampling_params.h).
//
// Per row, in this order (the rules of vLLM / the OpenAI API):
//  1. penalties on the raw logits, from the request's token history:
//       repetition (tokens of prompt or output): l > 0 ? l / r : l * r;
//       frequency and presence (output tokens): l -= frequency * count + presence * (count > 0);
//     then banned tokens (EOS and stop token ids before min_tokens) get -inf;
//  2. temperature 0: the argmax (greedy; the random stream is not touched);
//  3. otherwise l / temperature, then min_p (drop tokens whose probability is below min_p times
//     the highest), top_k (keep the k most likely), top_p (keep the smallest set of most likely
//     tokens whose renormalised probability reaches top_p; the most likely token always stays),
//     and one draw by inverse CDF with a uniform from the request's stream. One uniform per step
//     and per request: a seeded request gets the same tokens whatever it is batched with.
// Log probabilities (when asked for) are those of the raw logits (before penalties and
// temperature), as vLLM reports them: the chosen token's and the n most likely tokens'.
//
// Thread safety: stateless; call from the engine thread (the rows' SamplingStates are mutated).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "engine/sampling_params.h"

namespace omnirt::engine {

struct TokenLogprob {
    std::int32_t token = 0;
    float logprob = 0;
    friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct SampledToken {
    std::int32_t token = -1;
    float logprob = 0;              // meaningful when the request asked for logprobs
    std::vector<TokenLogprob> top;  // params.logprobs entries, most likely first
};

struct SamplerRow {
    SamplingState* state = nullptr;        // required
    std::span<const std::int32_t> banned;  // token ids whose logits become -inf
};

class Sampler {
  public:
    // `logits` is [rows.size(), vocab], floating point, on any device. Token ids outside
    // [0, vocab) in histories and bans are ignored. Errors: invalid_argument for a shape that
    // does not match, internal for a libtorch failure.
    [[nodiscard]] static Result<std::vector<SampledToken>> sample(const at::Tensor& logits,
                                                                  std::span<const SamplerRow> rows);

    // Step 1 alone: a float32 copy of `logits` with penalties and bans applied. For tests.
    [[nodiscard]] static Result<at::Tensor> penalized_logits(const at::Tensor& logits,
                                                             std::span<const SamplerRow> rows);
    // The distribution step 3 draws from, [rows, vocab] float64 in vocabulary order (one-hot
    // at the argmax for greedy rows). Does not touch the random streams. For tests.
    [[nodiscard]] static Result<at::Tensor> sampling_distribution(const at::Tensor& logits,
                                                                  std::span<const SamplerRow> rows);
};

}  // namespace omnirt::engine

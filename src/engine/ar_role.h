#pragma once
// ArRole: the one place a model's specifics meet the AR engine (the role adapter of a stage: a
// text model, Qwen3-Omni's thinker or talker, S2-Pro's slow AR). The engine (ar_scheduler.h)
// schedules, computes and samples; the role says what a request's prompt is, what goes into each
// forward besides token ids, when a sequence may step, what leaves per token and what the result
// holds. Every method has a default, so a plain text model needs none of them.
//
// A request's life, as the role sees it (all on the engine thread):
//   open_request(payload)   -> RequestSetup: prompt ids, content at prompt positions (embeddings,
//                              layer injections, explicit positions), captures, typed state
//   ready(sequence)         -> may it take a step now (e.g. a talker waits for its thinker)
//   prepare_step(seq, in)   -> last changes to the step's input (the engine filled the setup's
//                              content, feedback embeddings and captures already)
//   [forward, sampling, depth decoder]
//   feedback(seq, token)    -> the next input embedding (with a depth model: made from the frame)
//   on_token(seq, token)    -> extra fields of the token's stream chunks
//   make_result(seq)        -> the result's data when the request finishes
//   preempted(seq)          -> its cache positions were given up; they are computed again
//   close_request(seq)      -> it left (finished, failed, aborted or the engine stopped)
//
// Content and the prefix cache: the engine keys cached KV blocks by what determined them. What
// the role hands over in RequestSetup (embeddings, layer injections, positions) and the feedback
// embeddings are held by the engine, injected again when positions are recomputed (chunked
// prefill, preemption) and hashed into the cache keys of their positions, so two requests with
// the same placeholder ids but other media never share blocks. A role that changes a step's
// content in prepare_step instead must turn the prefix cache off for the request
// (RequestSetup::prefix_cache = false); the engine fails a request that does not.
//
// Errors from any method fail that request only (a throw counts as an internal error).
//
// Thread safety: every method runs on the engine thread; tensor-parallel ranks each run their own
// role object on the same messages and must decide alike.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "engine/model_runner.h"
#include "engine/sampling_params.h"

namespace omnirt::engine {

class ArSequence;
struct SampledToken;

// A role's own per-request state (ArSequence::role_state<T>()); destroyed after close_request.
class RoleRequestState {
  public:
    virtual ~RoleRequestState() = default;
};

// Values for consecutive positions (cache indices) [begin, begin + values.size(0)).
struct PositionRun {
    std::int64_t begin = 0;
    at::Tensor values;  // [n, hidden], floating point
    // What the values are a function of (e.g. a hash of the image file); 0: the engine hashes
    // the values' bytes. Two runs with the same key must hold the same values.
    std::uint64_t content_key = 0;
};

struct LayerRun {
    std::int32_t after_layers = 1;  // added after this many decoder layers (model_runner.h)
    PositionRun add;
};

// Hidden states after `after_layers` layers (0 = input embeddings) of positions [begin, end),
// end -1 = every position the request computes (its prompt and each decode step).
struct CaptureSpec {
    std::int32_t after_layers = 0;
    std::int64_t begin = 0;
    std::int64_t end = -1;
};

struct RequestSetup {
    std::vector<std::int32_t> prompt;  // token ids (placeholder ids where embeddings go)
    std::string cache_salt;            // joins the prefix-cache key
    bool prefix_cache = true;
    // The request's stream targets, a subset of the stage's; none: all of them.
    std::optional<std::vector<std::string>> stream_targets;
    std::vector<PositionRun> embeddings;     // replace the token embeddings of prompt positions
    std::vector<LayerRun> layer_injections;  // DeepStack
    // Rotary positions of the prompt, int64 [prompt] or [axes, prompt] (M-RoPE); undefined: the
    // cache index. Positions past the prompt are cache index + position_offset on every axis.
    at::Tensor positions;
    std::int64_t position_offset = 0;
    std::vector<CaptureSpec> captures;
    // Sampling of the depth model's codes, one entry for every depth or one per depth; empty:
    // the stage's (ArEngineConfig::depth_sampling).
    std::vector<SamplingParams> depth_sampling;
    std::unique_ptr<RoleRequestState> state;
};

// One sampled token of a sequence, after the step (and the frame's depth codes).
struct TokenStep {
    std::int32_t token = 0;
    std::int64_t index = 0;               // in the output
    std::span<const std::int32_t> codes;  // the depth model's codes (empty without one, or stop)
    const at::Tensor* hidden = nullptr;   // [hidden] final hidden state, when asked for
    const SampledToken* sample = nullptr;
    bool stop = false;  // an EOS / stop token: generation ends with it
};

// Fields added to a token's stream chunks: `all` to the client's and the targets', `targets` to
// the stream targets' only (e.g. hidden states for a talker).
struct TokenFields {
    Map all;
    Map targets;
};

class ArRole {
  public:
    virtual ~ArRole() = default;

    // Default: the prompt from data.input_ids (an i32 / i64 host tensor [n] or [1, n], or a list
    // of ints) and data.cache_salt (a string), as read_request_setup() does.
    [[nodiscard]] virtual Result<RequestSetup> open_request(const StagePayload& payload);
    virtual void close_request(ArSequence& /*sequence*/) {}
    virtual void preempted(ArSequence& /*sequence*/) {}
    // Must depend on the sequence's state only; must not throw.
    [[nodiscard]] virtual bool ready(const ArSequence& /*sequence*/) { return true; }
    [[nodiscard]] virtual Status prepare_step(ArSequence& /*sequence*/, SequenceInput& /*input*/) {
        return ok_status();
    }

    // Text: a role that produces text appends the UTF-8 bytes a token adds (possibly part of a
    // character); the engine then streams "text" deltas and applies stop strings.
    [[nodiscard]] virtual bool produces_text() const { return false; }
    [[nodiscard]] virtual Status detokenize(std::int32_t token, std::string& text);
    // Token ids never sampled for this sequence (e.g. a talker's text-only ids).
    [[nodiscard]] virtual std::span<const std::int32_t> suppressed_tokens(
        const ArSequence& /*sequence*/) {
        return {};
    }

    // Whether on_token needs the final hidden state of the sequence's tokens (always given with a
    // depth model).
    [[nodiscard]] virtual bool wants_hidden(const ArSequence& /*sequence*/) { return false; }
    // With a depth model: the embedding [hidden] the token's position gets instead of its token
    // embedding (undefined: the token embedding). Called for every non-stop token; it must be a
    // function of the sequence so far (it is hashed into the prefix-cache key).
    [[nodiscard]] virtual Result<at::Tensor> feedback(ArSequence& /*sequence*/,
                                                      const TokenStep& /*step*/) {
        return at::Tensor();
    }
    [[nodiscard]] virtual Result<TokenFields> on_token(ArSequence& /*sequence*/,
                                                       const TokenStep& /*step*/) {
        return TokenFields{};
    }
    // Default: {"output_ids": i32 [n], "text" (with text), "finish_reason", "usage":
    // {"prompt_tokens", "completion_tokens"}, "logprobs" (when asked for), "codes": i32 [n, 1 +
    // depth codes] (with a depth model; a stop token's row is not included)}. The scheduler adds
    // usage.engine_time_s (seconds in the stage) to a result that has a usage map.
    [[nodiscard]] virtual Result<Map> make_result(const ArSequence& sequence,
                                                  const std::string& finish_reason);
};

// The default open_request: data.input_ids and data.cache_salt of `payload`.
[[nodiscard]] Result<RequestSetup> read_request_setup(const StagePayload& payload);
// data.cache_salt: a string, or "" when absent or null.
[[nodiscard]] Result<std::string> read_cache_salt(const Value& data);

// The hash the engine keys content by (dtype, shape and bytes of `values`), for roles that
// compute a PositionRun::content_key once and reuse it.
[[nodiscard]] std::uint64_t content_hash(const at::Tensor& values);

// A host float32 copy of one hidden-state row, as a Value; null when it cannot be converted.
[[nodiscard]] Value hidden_row_value(const at::Tensor& row);

}  // namespace omnirt::engine

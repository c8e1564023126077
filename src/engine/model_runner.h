#pragma once
// The contract between the AR engine (scheduling, KV blocks, sampling) and a model (forward
// passes over a paged KV cache). The engine decides what runs; the runner only computes.
//
// One forward step runs a batch of sequences; each contributes `tokens` new tokens (a prefill
// chunk, or one decode token) whose cache indices start at `start_position`. Their keys and
// values go into the KV cache slots of `block_table` (block b holds cache indices [b *
// block_size, (b + 1) * block_size)); the first `start_position` indices are already in the cache
// (earlier steps, or a prefix-cache hit). The runner returns the logits of the LAST new token of
// each sequence (the only ones sampling needs).
//
// A step's input is one typed struct per sequence (SequenceInput); besides the token ids it may
// carry what the omni roles need (pipeline.md: ThinkerModelRunner, FeedbackARModelRunner):
//  - embeddings that replace the token embeddings of chosen rows (multimodal features at
//    placeholder tokens, or a feedback embedding made from the previous frame's codes);
//  - explicit rotary positions: one row (1-D) or one row per axis (M-RoPE: temporal, height,
//    width); without them the position of row i is start_position + i;
//  - additive injections into the hidden states after the first k decoder layers (DeepStack);
//  - captures: the hidden states after chosen layers over chosen rows (a thinker's input
//    embeddings and layer-24 states for its talker).
// "After n layers" numbers hidden states like transformers' output_hidden_states: 0 is the input
// embeddings (after embedding injection), n is the output of decoder layer n - 1 (after the
// injections of n). The final norm is not part of any of them.
//
// A model states what it supports (capabilities()); the engine refuses a role that needs more.
//
// Thread safety: a runner is driven by one engine thread; forward() is not reentrant.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::engine {

struct KVCacheSpec {
    int num_layers = 0;
    int num_kv_heads = 0;  // per TP rank
    int head_dim = 0;
    at::ScalarType dtype = at::kFloat;
};

// Values at chosen rows of a step (indices into SequenceInput::tokens, ascending and distinct).
struct RowValues {
    std::vector<std::int64_t> rows;
    at::Tensor values;  // [rows.size(), hidden], floating point, any device
};

// Values added to the hidden states after the first `after_layers` decoder layers
// (1 <= after_layers <= the model's layers).
struct LayerInjection {
    std::int32_t after_layers = 1;
    RowValues add;
};

// The hidden states after `after_layers` layers (0 = the input embeddings) of rows [row_begin,
// row_end) of the step.
struct CaptureRequest {
    std::int32_t after_layers = 0;
    std::int64_t row_begin = 0;
    std::int64_t row_end = 0;
};

struct SequenceInput {
    std::string request_id;
    std::vector<std::int32_t> tokens;       // new tokens of this step (>= 1)
    std::int64_t start_position = 0;        // cache index of tokens[0]
    std::vector<std::int32_t> block_table;  // KV blocks of the sequence, in cache-index order
    // Rows whose token embedding is replaced (their token ids are not looked up).
    std::optional<RowValues> embeddings;
    // Rotary positions, int64 [tokens.size()] or [axes, tokens.size()]; undefined: row i is at
    // start_position + i on every axis.
    at::Tensor positions;
    std::vector<LayerInjection> layer_injections;
    std::vector<CaptureRequest> captures;
    bool want_hidden = false;  // fill ForwardOutput::hidden for this sequence
};

struct ForwardOutput {
    at::Tensor logits;  // [num_sequences, vocab] float32, last new token of each sequence
    // [num_sequences, hidden] final hidden state (after the last norm) of the last new token;
    // defined when any sequence asked for it (rows of the others are unspecified).
    at::Tensor hidden;
    // captures[i][j]: [row_end - row_begin, hidden] for batch[i].captures[j] (empty when the
    // batch asked for none), in the model's dtype and device.
    std::vector<std::vector<at::Tensor>> captures;
};

// What a runner supports beyond token ids.
struct ModelCapabilities {
    bool embeddings = false;        // SequenceInput::embeddings
    int position_axes = 1;          // rows SequenceInput::positions may have (1, or 3 for M-RoPE)
    bool layer_injections = false;  // SequenceInput::layer_injections
    bool captures = false;          // SequenceInput::captures
    std::int32_t num_layers = 0;    // decoder layers (bounds after_layers)
    std::int64_t hidden_size = 0;   // width of embeddings, injections and captures
};

class KVCache;  // kv_cache.h: per-layer paged K/V storage

class ModelRunner {
  public:
    virtual ~ModelRunner() = default;
    [[nodiscard]] virtual KVCacheSpec kv_spec() const = 0;
    [[nodiscard]] virtual std::int64_t vocab_size() const = 0;
    [[nodiscard]] virtual std::int64_t max_positions() const = 0;
    [[nodiscard]] virtual ModelCapabilities capabilities() const { return {}; }
    // Per-request runner state, typed by the runner instead of untyped slots on the sequence:
    // the engine opens a request when it is admitted (before its first forward) and closes it
    // when the request gives its cache positions up: it finished, failed or was aborted, it was
    // preempted (it is opened again when it is admitted again and recomputes), or the engine
    // stops. An open error fails the request.
    [[nodiscard]] virtual Status open_request(const std::string& /*request_id*/) {
        return ok_status();
    }
    virtual void close_request(const std::string& /*request_id*/) {}
    [[nodiscard]] virtual Result<ForwardOutput> forward(std::span<const SequenceInput> batch,
                                                        KVCache& cache) = 0;
};

}  // namespace omnirt::engine

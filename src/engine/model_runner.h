#pragma once
// The contract between the AR engine (scheduling, KV blocks, sampling) and a model (forward
// passes over a paged KV cache). The engine decides what runs; the runner only computes.
//
// One forward step runs a batch of sequences; each contributes `tokens` new tokens (a prefill
// chunk, or one decode token) starting at `start_position`. Their keys and values go into the
// KV cache slots of `block_table` (block b holds positions [b * block_size, (b + 1) *
// block_size)); the first `start_position` positions are already in the cache (earlier steps,
// or a prefix-cache hit). The runner returns the logits of the LAST new token of each sequence
// (the only ones sampling needs).
//
// Omni roles plug in through the hooks (pipeline.md: ThinkerModelRunner, FeedbackARModelRunner):
// `input_embeds` replaces the embedding of chosen positions before the forward (multimodal
// injection), and `hidden_out` asks for the final hidden state of the last token (what a
// thinker streams to a talker, or what a feedback loop feeds back).
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

struct SequenceInput {
    std::string request_id;
    std::vector<std::int32_t> tokens;       // new tokens of this step (>= 1)
    std::int64_t start_position = 0;        // position of tokens[0]
    std::vector<std::int32_t> block_table;  // KV blocks of the sequence, in position order
    // Optional [tokens.size(), hidden] embeddings used instead of the token embeddings where
    // `embed_mask` (tokens.size() bools) is true (ThinkerModelRunner's injection hook).
    std::optional<at::Tensor> input_embeds;
    std::vector<bool> embed_mask;
    bool want_hidden = false;  // fill ForwardOutput::hidden for this sequence
};

struct ForwardOutput {
    at::Tensor logits;  // [num_sequences, vocab] float32, last new token of each sequence
    // [num_sequences, hidden] final hidden state (after the last norm) of the last new token;
    // defined when any sequence asked for it (rows of the others are unspecified).
    at::Tensor hidden;
};

class KVCache;  // kv_cache.h: per-layer paged K/V storage

class ModelRunner {
public:
    virtual ~ModelRunner() = default;
    [[nodiscard]] virtual KVCacheSpec kv_spec() const = 0;
    [[nodiscard]] virtual std::int64_t vocab_size() const = 0;
    [[nodiscard]] virtual std::int64_t max_positions() const = 0;
    [[nodiscard]] virtual Result<ForwardOutput> forward(std::span<const SequenceInput> batch,
                                                        KVCache& cache) = 0;
};

}  // namespace omnirt::engine

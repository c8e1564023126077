#pragma once
// Qwen3Model: the Qwen3 / Qwen3-MoE text decoder (Qwen3-Omni's thinker text model) as an
// engine::ModelRunner over a paged KV cache.
//
// One forward step (model_runner.h) over all the new tokens of the batch:
//   x = embed_tokens[tokens] (rows replaced by SequenceInput::embeddings)
//   per layer:  h = RMSNorm(x); q, k, v = h * Wqkv^T (one fused matmul for every token);
//               q, k = RMSNorm over head_dim (q_norm, k_norm); RoPE(q, k);
//               k, v -> cache slots of the block tables; a = causal GQA attention of each
//               sequence over its cached context; x += a * Wo^T;
//               x += SwiGLU(RMSNorm(x)) (dense) or the routed experts' sum (MoE), plus
//               sigmoid(gate(h)) * shared expert(h) where there is a shared expert
//   logits = RMSNorm(x[last token of each sequence]) * lm_head^T, float32 (with
//            options.logit_rows only those rows of lm_head; every other logit is -inf).
// Layer injections (DeepStack) are added to x after their layer, and captures copy x there (0:
// after the embedding); positions come from SequenceInput::positions when given (the rotary
// embedding decides how many axes it takes: 1, or 3 for M-RoPE).
// Linear layers and norms run batched over all tokens of the step; only attention runs per
// sequence (engine/paged_attention.h).
//
// Tensor parallelism (options.tensor_parallel, tensor_parallel.h): each rank holds its shard of
// the weights (qwen3_weights.h: heads, kv heads, MLP / expert columns, vocabulary rows) and the
// forward adds, per layer, an all-reduce after o_proj (biases added after it) and one after the
// MLP / MoE down projections; the embedding lookup of each rank's vocabulary rows is masked and
// all-reduced; the lm_head logits of each rank's rows are all-gathered, so forward() returns the
// full [sequences, vocab] logits, the same on every rank. kv_spec() counts this rank's kv heads.
// Every rank must run forward() on the same batch at the same time (the engine's lockstep).
//
// Thread safety: create() may run on any thread; forward() is driven by one engine thread and is
// not reentrant (the rotary table cache is mutable). The weights are immutable after create().
#include <ATen/core/Tensor.h>

#include <c10/core/Device.h>
#include <vector>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/error.h"
#include "engine/attention_index.h"
#include "engine/model_runner.h"
#include "engine/tp_communicator.h"
#include "models/qwen3/config.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/qwen3/rotary_embedding.h"

namespace omnirt::models::qwen3 {

struct Qwen3ModelOptions {
    // Weights, activations and KV cache: float32, bfloat16, or float16 (CUDA only).
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;
    std::string weight_prefix;  // "thinker." for Qwen3-Omni's thinker
    // Names of the embedding table and the head after the prefix (the talker's differ).
    std::string embed_name = "model.embed_tokens.weight";
    std::string lm_head_name = "lm_head.weight";
    // Position encoding; null: DefaultRotaryEmbedding(head_dim, rope_theta). M-RoPE plugs in here.
    std::unique_ptr<RotaryEmbedding> rotary;
    // Tensor parallelism: this rank's group (its rank() and size() pick the weight shard); null
    // for one rank.
    std::shared_ptr<engine::TpCommunicator> tensor_parallel;
    // Attention through the batched gathered path (engine/attention_index.h) on the CPU too,
    // instead of the CPU kernel: what every other device runs; for tests and comparisons.
    bool gathered_attention = false;
    // The only token ids a caller ever samples (ascending, unique, in the vocabulary), e.g.
    // S2-Pro's semantic tokens and <|im_end|>: the head multiplies only those rows of lm_head
    // (a copy of them made at create()) and every other logit is -inf. Empty: every row. One
    // rank only. On a small model with a large vocabulary the head is most of a decode step.
    std::vector<std::int64_t> logit_rows;
};

class Qwen3Model final : public engine::ModelRunner {
  public:
    // Loads every weight through `lookup` (errors name the tensor; see qwen3_weights.h) and
    // converts it to options.dtype once.
    [[nodiscard]] static Result<std::unique_ptr<Qwen3Model>> create(const Qwen3Config& config,
                                                                    const WeightLookup& lookup,
                                                                    Qwen3ModelOptions options = {});

    [[nodiscard]] engine::KVCacheSpec kv_spec() const override;
    // Embeddings, layer injections and captures; the rotary embedding's position axes.
    [[nodiscard]] engine::ModelCapabilities capabilities() const override;
    [[nodiscard]] std::int64_t vocab_size() const override { return config_.vocab_size; }
    [[nodiscard]] std::int64_t max_positions() const override {
        return config_.max_position_embeddings;
    }
    // Errors (nothing is written to the cache then): invalid_argument for a malformed batch
    // (empty tokens, token ids outside the vocabulary, a block table too short or naming blocks
    // outside the cache, embeddings / injections / captures / positions of the wrong shape),
    // out_of_range for positions beyond max_positions(), failed_precondition for a cache of another
    // spec or device; unavailable when a tensor-parallel collective fails (the cache may then hold
    // this step's keys for some layers); internal when libtorch fails.
    [[nodiscard]] Result<engine::ForwardOutput> forward(
        std::span<const engine::SequenceInput> batch, engine::KVCache& cache) override;

    [[nodiscard]] const Qwen3Config& config() const { return config_; }
    [[nodiscard]] at::ScalarType dtype() const { return dtype_; }
    [[nodiscard]] at::Device device() const { return device_; }
    [[nodiscard]] const Qwen3Weights& weights() const { return weights_; }

  private:
    Qwen3Model(const Qwen3Config& config, Qwen3Weights weights, Qwen3ModelOptions options);

    [[nodiscard]] Status check_batch(std::span<const engine::SequenceInput> batch,
                                     const engine::KVCache& cache) const;
    // Rows, shapes and ranges of a sequence's embeddings, injections, captures and positions.
    [[nodiscard]] Status check_content(const engine::SequenceInput& sequence,
                                       std::int64_t count) const;
    // Writes (replace) or adds `values` into the rows of x [batch tokens, hidden] of a sequence
    // whose first row is `offset`.
    void write_rows(at::Tensor& x, std::int64_t offset, const engine::RowValues& values,
                    bool replace) const;
    // After `after_layers` layers: each sequence's injections of that depth, then its captures
    // (a sequence's captures see its own injections; rows of other sequences are apart).
    void layer_content(std::int32_t after_layers, at::Tensor& x,
                       std::span<const engine::SequenceInput> batch,
                       engine::ForwardOutput& output) const;
    [[nodiscard]] Result<engine::ForwardOutput> run(std::span<const engine::SequenceInput> batch,
                                                    engine::KVCache& cache);
    [[nodiscard]] at::Tensor embed(std::span<const engine::SequenceInput> batch,
                                   const at::Tensor& token_ids) const;
    [[nodiscard]] at::Tensor lm_head(const at::Tensor& hidden) const;
    // Sums a row-parallel partial result over the ranks (nothing with one rank).
    void reduce(at::Tensor& partial) const;
    // `attention`: the batch's device indices (engine/attention_index.h) on devices without
    // the CPU attention kernel, built once per forward; null on the CPU.
    void decoder_layer(std::int64_t index, at::Tensor& x, const RotaryTables& rotary,
                       const at::Tensor& slots, std::span<const engine::SequenceInput> batch,
                       const engine::AttentionIndex* attention, engine::KVCache& cache) const;

    Qwen3Config config_;
    Qwen3Weights weights_;
    at::ScalarType dtype_;
    at::Device device_;
    std::unique_ptr<RotaryEmbedding> rotary_;
    std::shared_ptr<engine::TpCommunicator> tensor_parallel_;
    bool gathered_attention_;
    at::Tensor head_rows_;     // options.logit_rows of lm_head [rows, hidden]; undefined: all
    at::Tensor head_row_ids_;  // their ids (int64, on the device)
};

}  // namespace omnirt::models::qwen3

#pragma once
// Loading the weights of a Qwen3 / Qwen3-MoE text model by their Hugging Face names into
// owning (or mmap-sharing) at::Tensors of the model dtype, checked against the config.
//
// Names (after an optional prefix such as "thinker." for Qwen3-Omni):
//   model.embed_tokens.weight                              [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight                [hidden]
//   model.layers.{i}.post_attention_layernorm.weight       [hidden]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight       q [heads * d, hidden], k/v [kv_heads *
//                                                          d, hidden], o [hidden, heads * d]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.bias         only when attention_bias
//   model.layers.{i}.self_attn.{q,k}_norm.weight           [d]
//   dense: model.layers.{i}.mlp.{gate,up,down}_proj.weight [I, hidden], [I, hidden], [hidden, I]
//   MoE:   model.layers.{i}.mlp.gate.weight                [experts, hidden]
//          model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight (moe_intermediate_size)
//          with shared_expert_intermediate_size > 0 (Qwen3-Omni's talker):
//          model.layers.{i}.mlp.shared_expert.{gate,up,down}_proj.weight and
//          model.layers.{i}.mlp.shared_expert_gate.weight [1, hidden]
//   model.norm.weight                                      [hidden]
//   lm_head.weight                                         [vocab, hidden] (absent when tied)
// The embedding table and the head may carry other names (Qwen3WeightOptions: the talker's
// model.codec_embedding.weight and codec_head.weight).
//
// q/k/v rows are fused into one [(heads + 2 * kv_heads) * d, hidden] matrix and gate/up into one
// [2 * I, hidden] matrix (one matmul each per step); those are new tensors. The others are
// zero-copy views of the source when it already has the model dtype and device, and converted
// copies otherwise.
//
// Tensor parallelism (tp_size > 1): each rank loads only its slice of every sharded tensor (a
// narrow() of the source, so a mapped checkpoint reads only the slice's pages):
//   q/k/v, gate/up      column-parallel: the rows of this rank's heads / intermediate slice,
//                       fused per rank; kv heads are split when num_key_value_heads divides by
//                       tp_size, and each replicated on tp_size / num_key_value_heads ranks when
//                       tp_size divides by num_key_value_heads;
//   o, down             row-parallel: the matching input columns (the forward all-reduces);
//   experts             every expert on every rank, its moe_intermediate columns split like a
//                       dense MLP (one all-reduce per MoE block; the router is replicated);
//                       the shared expert's columns likewise (its gate is replicated);
//   embed_tokens,       vocabulary-parallel: rows [rank * ceil(vocab / tp), ...) (the forward
//   lm_head             masks and all-reduces the lookup, and all-gathers the logits);
//   norms, router       replicated.
// Sizes that do not split are refused (qwen3_shard()).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "engine/cpu_packed_weight.h"
#include "models/qwen3/config.h"

namespace omnirt::models::qwen3 {

// Returns the named tensor of a checkpoint (for example a view of its mmap): not_found when
// absent. Checkpoint::tensor fits: [&](const std::string& n) { return checkpoint.tensor(n); }.
using WeightLookup = std::function<Result<Tensor>(const std::string& name)>;

struct Qwen3LayerWeights {
    at::Tensor input_layernorm;
    at::Tensor post_attention_layernorm;
    at::Tensor qkv_proj;  // [(heads + 2 * kv_heads) * head_dim, hidden]: q rows, k rows, v rows
    at::Tensor qkv_bias;  // attention_bias only: [(heads + 2 * kv_heads) * head_dim]
    at::Tensor q_norm;
    at::Tensor k_norm;
    at::Tensor o_proj;
    at::Tensor o_bias;  // attention_bias only
    // Dense layers.
    at::Tensor gate_up_proj;  // [2 * intermediate, hidden]: gate rows, then up rows
    at::Tensor down_proj;
    // MoE layers (router defined).
    at::Tensor router;                       // [experts, hidden]
    std::vector<at::Tensor> expert_gate_up;  // per expert [2 * moe_intermediate, hidden]
    std::vector<at::Tensor> expert_down;     // per expert [hidden, moe_intermediate]
    // The shared expert (undefined without one).
    at::Tensor shared_gate_up;  // [2 * shared_intermediate, hidden]
    at::Tensor shared_down;     // [hidden, shared_intermediate]
    at::Tensor shared_gate;     // [1, hidden]
    // The decode kernels' 12-bit copies of the dense matrices (engine/cpu_packed_weight.h):
    // bfloat16 on a CPU that runs them, unless OMNIRT_CPU_PACK=0; null otherwise. The experts
    // are not packed (their copies would add 0.75x of most of an MoE model's bytes).
    engine::cpu::PackedWeightPtr qkv_packed;
    engine::cpu::PackedWeightPtr o_packed;
    engine::cpu::PackedWeightPtr gate_up_packed;
    engine::cpu::PackedWeightPtr down_packed;
    engine::cpu::PackedWeightPtr shared_gate_up_packed;
    engine::cpu::PackedWeightPtr shared_down_packed;
};

// The part of the model one tensor-parallel rank holds (everything when size == 1).
struct Qwen3Shard {
    int rank = 0;
    int size = 1;
    std::int64_t heads = 0;  // attention heads of this rank: [first_head, first_head + heads)
    std::int64_t first_head = 0;
    std::int64_t kv_heads = 0;  // kv heads of this rank (1 replicated head when kv < size)
    std::int64_t first_kv_head = 0;
    std::int64_t intermediate = 0;      // dense MLP columns of this rank (0 without dense layers)
    std::int64_t moe_intermediate = 0;  // columns of every expert on this rank (0 when dense)
    std::int64_t vocab_begin = 0;       // embedding / lm_head rows [vocab_begin, + vocab_rows)
    std::int64_t vocab_rows = 0;
    std::int64_t vocab_shard = 0;  // ceil(vocab / size): every rank's row count but the last's
};

// The shard of `rank` among `size` ranks. invalid_argument, naming the sizes, when the rank is
// outside [0, size) or the heads, kv heads, MLP / expert widths or vocabulary do not split.
[[nodiscard]] Result<Qwen3Shard> qwen3_shard(const Qwen3Config& config, int rank, int size);

struct Qwen3Weights {
    at::Tensor embed_tokens;  // [vocab_rows, hidden] (this rank's vocabulary slice)
    std::vector<Qwen3LayerWeights> layers;
    at::Tensor norm;
    at::Tensor lm_head;  // the embedding table itself when tie_word_embeddings
    engine::cpu::PackedWeightPtr lm_head_packed;  // as the layers' packed matrices
    Qwen3Shard shard;
};

struct Qwen3WeightOptions {
    at::ScalarType dtype = at::kFloat;  // float32, bfloat16, or float16 (CUDA only)
    at::Device device = at::kCPU;
    std::string prefix;  // put before every name ("thinker." for Qwen3-Omni's thinker)
    int tp_rank = 0;     // tensor parallelism: load the slices of this rank of tp_size
    int tp_size = 1;
    std::string embed_name = "model.embed_tokens.weight";  // after the prefix
    std::string lm_head_name = "lm_head.weight";
};

// Errors name the tensor: the lookup's error (not_found for a missing tensor) with the name in
// front; invalid_argument for a wrong shape (got and expected; the checkpoint's full shape) or a
// non-floating dtype; the config's validate() errors; qwen3_shard()'s errors; unimplemented for
// what the forward does not do (sliding-window attention, activations other than silu).
[[nodiscard]] Result<Qwen3Weights> load_qwen3_weights(const Qwen3Config& config,
                                                      const WeightLookup& lookup,
                                                      const Qwen3WeightOptions& options);

}  // namespace omnirt::models::qwen3

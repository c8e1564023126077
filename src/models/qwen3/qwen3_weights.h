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
//   model.norm.weight                                      [hidden]
//   lm_head.weight                                         [vocab, hidden] (absent when tied)
//
// q/k/v rows are fused into one [(heads + 2 * kv_heads) * d, hidden] matrix and gate/up into one
// [2 * I, hidden] matrix (one matmul each per step); those are new tensors. The others are
// zero-copy views of the source when it already has the model dtype and device, and converted
// copies otherwise.
//
// Tensor parallelism (later): q/k/v and gate/up are column-parallel (each rank keeps its heads'
// / its intermediate slice's rows, fused per rank), o and down row-parallel (input-column slices
// followed by an all-reduce), embed_tokens / lm_head vocab-parallel; experts are split either
// per expert or per intermediate slice. The loader is the place that slices.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
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
};

struct Qwen3Weights {
    at::Tensor embed_tokens;  // [vocab, hidden]
    std::vector<Qwen3LayerWeights> layers;
    at::Tensor norm;
    at::Tensor lm_head;  // the embedding table itself when tie_word_embeddings
};

struct Qwen3WeightOptions {
    at::ScalarType dtype = at::kFloat;  // float32, bfloat16, or float16 (CUDA only)
    at::Device device = at::kCPU;
    std::string prefix;  // put before every name ("thinker." for Qwen3-Omni's thinker)
};

// Errors name the tensor: the lookup's error (not_found for a missing tensor) with the name in
// front; invalid_argument for a wrong shape (got and expected) or a non-floating dtype; the
// config's validate() errors; unimplemented for what the forward does not do (sliding-window
// attention, activations other than silu).
[[nodiscard]] Result<Qwen3Weights> load_qwen3_weights(const Qwen3Config& config,
                                                      const WeightLookup& lookup,
                                                      const Qwen3WeightOptions& options);

}  // namespace omnirt::models::qwen3

#pragma once
// The tensors of a Qwen3 / Qwen3-MoE causal LM as Hugging Face checkpoints name them, and the
// check that a checkpoint holds exactly those.
//
//   model.embed_tokens.weight                            [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight              [hidden]
//   model.layers.{i}.self_attn.q_proj.weight             [heads * head_dim, hidden]
//   model.layers.{i}.self_attn.k_proj.weight / v_proj    [kv_heads * head_dim, hidden]
//   model.layers.{i}.self_attn.o_proj.weight             [hidden, heads * head_dim]
//   (.bias of q/k/v/o when attention_bias)
//   model.layers.{i}.self_attn.q_norm.weight / k_norm    [head_dim]
//   model.layers.{i}.post_attention_layernorm.weight     [hidden]
//   dense layer:  model.layers.{i}.mlp.{gate,up}_proj.weight [intermediate, hidden],
//                 mlp.down_proj.weight                   [hidden, intermediate]
//   sparse layer: model.layers.{i}.mlp.gate.weight       [experts, hidden] (router)
//                 mlp.experts.{e}.{gate,up}_proj.weight  [moe_intermediate, hidden],
//                 mlp.experts.{e}.down_proj.weight       [hidden, moe_intermediate]
//   model.norm.weight                                    [hidden]
//   lm_head.weight                                       [vocab, hidden] (optional when tied)
//
// Every name may carry a prefix ("thinker." for the Qwen3-Omni thinker).
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dummy.h"
#include "checkpoint/tensor_check.h"
#include "models/qwen3/config.h"

namespace omnirt::models::qwen3 {

// In module order (embeddings, layers, final norm, head), as transformers' state_dict lists them.
[[nodiscard]] std::vector<checkpoint::ExpectedTensor> expected_tensors(
    const Qwen3Config& config, std::string_view prefix = "");

// The same tensors as dummy specs of `dtype`: norm weights centred on 1, the rest on 0. A tied
// model's lm_head.weight is left out.
[[nodiscard]] std::vector<checkpoint::TensorSpec> tensor_specs(const Qwen3Config& config,
                                                               DType dtype,
                                                               std::string_view prefix = "");

// ok when the checkpoint holds every expected tensor with its shape and nothing else under
// `prefix`; otherwise failed_precondition listing the missing, wrong-shape and unexpected ones.
[[nodiscard]] Status check_checkpoint(const Qwen3Config& config,
                                      const checkpoint::Checkpoint& checkpoint,
                                      std::string_view prefix = "");

// parse_qwen3_config() of the checkpoint's config.json, errors prefixed with its path.
[[nodiscard]] Result<Qwen3Config> load_config(const checkpoint::Checkpoint& checkpoint);

}  // namespace omnirt::models::qwen3

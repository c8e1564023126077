#pragma once
// What S2-Pro's decoders (fish-speech llama.py) do differently from the shared Qwen3 stack, and
// how they are mapped onto it:
//
//  - RoPE pairs ADJACENT dims (2i, 2i + 1) of a head (GPT-J style), where the shared stack's
//    apply_rotary() pairs dim i with i + head_dim / 2 (rotate-half). Permuting the dims of every
//    q and k head to [0, 2, 4, ..., 1, 3, 5, ...] turns the one into the other exactly, and
//    leaves q . k (hence attention) unchanged, so the loader permutes the q / k rows of wqkv and
//    the q_norm / k_norm weights once (deinterleave_heads()) and the forward is the shared one.
//  - The cos / sin table is rounded to bfloat16 (fish-speech keeps it in the model dtype; SGLang
//    rounds explicitly; fp32 tables gave garbled audio): FishRotaryEmbedding.
//  - Weight names: fish_stack_lookup() answers the shared loader's Hugging Face names from a
//    fish checkpoint (wqkv split into q / k / v, w1 / w3 / w2 as gate / up / down,
//    attention_norm / ffn_norm as input / post-attention layernorm).
//
// Thread safety: FishRotaryEmbedding is driven by the model thread (like forward()); the rest
// are pure functions.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "models/qwen3/qwen3_weights.h"
#include "models/qwen3/rotary_embedding.h"
#include "models/s2_pro/config.h"

namespace omnirt::models::s2_pro {

// Rows [heads * head_dim, ...] (or a [head_dim] norm weight) with each head's dims reordered
// from interleaved pairs to halves: new dim i < d/2 is old 2i, new dim d/2 + i is old 2i + 1.
[[nodiscard]] at::Tensor deinterleave_heads(const at::Tensor& rows, std::int64_t head_dim);

// The RoPE angles theta^(-2i / d) * position in float32, cos and sin rounded to bfloat16, in the
// rotate-half layout of qwen3::RotaryTables (each of the d / 2 values twice).
[[nodiscard]] qwen3::RotaryTables fish_rotary_tables(const at::Tensor& positions,
                                                     std::int64_t head_dim, double theta,
                                                     at::Device device);

class FishRotaryEmbedding final : public qwen3::RotaryEmbedding {
  public:
    FishRotaryEmbedding(std::int64_t head_dim, double theta, std::int64_t max_positions,
                        at::Device device);
    [[nodiscard]] Result<qwen3::RotaryTables> tables(std::span<const engine::SequenceInput> batch,
                                                     std::int64_t total_tokens) override;

  private:
    std::int64_t head_dim_;
    std::int64_t max_positions_;
    at::Device device_;
    qwen3::RotaryTables cache_;  // positions [0, cache_.cos.size(0))
    double theta_;
};

// The shared loader's names (model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight,
// ...) answered from the fish tensors under `fish_prefix` ("text_model.model."), q / k rows and
// norms de-interleaved. Errors name the fish tensor (its lookup error, or a wqkv of the wrong
// shape).
[[nodiscard]] qwen3::WeightLookup fish_stack_lookup(qwen3::WeightLookup fish,
                                                    const FishDecoderConfig& config,
                                                    std::string fish_prefix);

}  // namespace omnirt::models::s2_pro

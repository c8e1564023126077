#pragma once
// S2-Pro's fast AR (`audio_decoder.*`, fact sheet section 5) as the AR engine's depth decoder
// (engine/depth_model.h): after every slow-AR step it generates the frame's codebooks, batched
// over every sequence that produced a semantic token in the step.
//
// A frame of rows R (one per sequence; h = the slow AR's final-normed hidden, s its token):
//   begin_frame(h, s)   position 0 = h through the layers (KV slot 0; its logits are unused);
//                       returns the depth-0 logits: 0 at c_0 = clamp(s - semantic_begin, 0,
//                       codebook_size - 1), -inf elsewhere, so any sampling picks c_0
//   next(k, c_{k-1})    k = 1 .. num_codebooks - 1: position k = embeddings[c_{k-1}] -> layers
//                       -> norm -> output: the logits of c_k (all codebook_size entries)
// The codes c_0 .. c_9 are the frame the codec decodes; the role feeds them back (role.h).
//
// The layers are the fish stack without q/k norms: RMSNorm, fused wqkv (q / k rows
// de-interleaved for the shared rotate-half RoPE, fish_layers.h), bf16-rounded RoPE over
// positions 0 .. num_codebooks - 1, causal GQA over the frame's own KV ([R, positions, kv_heads,
// d] per layer, freed by end_frame()), SwiGLU. Softmax of the attention in float32.
//
// Thread safety: driven by one engine thread (DepthModel); the weights are immutable.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "engine/depth_model.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/qwen3/rotary_embedding.h"
#include "models/s2_pro/config.h"

namespace omnirt::models::s2_pro {

struct FastArLayer {
    at::Tensor attention_norm;
    at::Tensor wqkv;  // [(heads + 2 kv_heads) d, dim], q / k rows de-interleaved
    at::Tensor wo;
    at::Tensor ffn_norm;
    at::Tensor gate_up;  // [2 I, dim]: w1 rows, then w3 rows
    at::Tensor down;     // w2
    // The decode kernels' packed copies (engine/cpu_packed_weight.h; null where not packed).
    engine::cpu::PackedWeightPtr wqkv_packed;
    engine::cpu::PackedWeightPtr wo_packed;
    engine::cpu::PackedWeightPtr gate_up_packed;
    engine::cpu::PackedWeightPtr down_packed;
};

struct FastArWeights {
    at::Tensor embeddings;  // [codebook_size, dim]
    std::vector<FastArLayer> layers;
    at::Tensor norm;
    at::Tensor output;  // [codebook_size, dim]
    engine::cpu::PackedWeightPtr output_packed;
};

class FastAr final : public engine::DepthModel {
  public:
    // Loads `audio_decoder.*` (not codebook_embeddings: the slow AR's input, role.h) through
    // `lookup` (fish names) in `dtype` on `device`. Errors name the tensor: not_found when
    // missing, invalid_argument for a wrong shape; unimplemented for q/k norms (the release has
    // none).
    [[nodiscard]] static Result<std::unique_ptr<FastAr>> create(const S2ProConfig& config,
                                                                const qwen3::WeightLookup& lookup,
                                                                at::ScalarType dtype,
                                                                at::Device device);

    [[nodiscard]] int num_codes() const override;
    [[nodiscard]] std::int64_t vocab_size(int depth) const override;
    [[nodiscard]] Result<at::Tensor> begin_frame(const at::Tensor& hidden,
                                                 std::span<const std::int32_t> tokens) override;
    [[nodiscard]] Result<at::Tensor> next(int depth,
                                          std::span<const std::int32_t> previous) override;
    void end_frame() override;

    // The frame's scratch KV is empty (tests: end_frame() freed it).
    [[nodiscard]] bool frame_free() const { return keys_.empty(); }

  private:
    FastAr(const S2ProConfig& config, FastArWeights weights, at::ScalarType dtype,
           at::Device device);
    // Runs x [R, dim] at position length_ through the layers; returns the final-normed [R, dim].
    [[nodiscard]] at::Tensor step(at::Tensor x);
    [[nodiscard]] Result<at::Tensor> codes_tensor(std::span<const std::int32_t> codes) const;

    S2ProConfig config_;
    FastArWeights weights_;
    at::ScalarType dtype_;
    at::Device device_;
    qwen3::RotaryTables rotary_;    // positions [0, num_codebooks)
    std::vector<at::Tensor> keys_;  // per layer [R, num_codebooks, kv_heads, d] during a frame
    std::vector<at::Tensor> values_;
    std::int64_t length_ = 0;
    std::int64_t rows_ = 0;
};

}  // namespace omnirt::models::s2_pro

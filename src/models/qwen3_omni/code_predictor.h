#pragma once
// Qwen3-Omni's code predictor (`talker.code_predictor.*`, qwen3-omni.md §6) as the AR engine's
// depth decoder (engine/depth_model.h): after every talker step it generates the 15 residual
// codes of each frame, batched over every talker sequence of the step.
//
// A frame of rows R (one per talker sequence that produced a code c0):
//   begin_frame(h [R, H], c0): positions 0, 1 = h, talker codec_embedding(c0); both computed;
//                              logits of position 1 through lm_head[0] -> c1
//   next(g, c_{g-1}), g = 1..14: position g + 1 = codec_embedding[g - 1](c_{g-1}); logits
//                              through lm_head[g] -> c_{g+1}
// The decoder is a dense Qwen3 stack (q/k norms, GQA, SwiGLU) with plain 1-D RoPE, causal, its
// KV held for the frame only: [R, 16, kv_heads, head_dim] per layer, freed by end_frame().
// All rows of a frame sit at the same position, so attention is one batched matmul per layer
// with the queries grouped by kv head (softmax in float32, as transformers' eager / sdpa
// attention); the RoPE tables of the frame's 16 positions are computed once.
//
// feedback_sum(c0, codes) is what the talker takes as its next input besides the text
// (§5.5): talker codec_embedding(c0) + sum_g codec_embedding[g - 1](c_g).
//
// Thread safety: driven by one engine thread (DepthModel); the weights are immutable.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "engine/depth_model.h"
#include "models/qwen3/qwen3_weights.h"
#include "models/qwen3/rotary_embedding.h"
#include "models/qwen3_omni/talker_config.h"

namespace omnirt::models::qwen3_omni {

struct CodePredictorWeights {
    qwen3::Qwen3Weights decoder;              // layers and norm (embed / head: group 0's)
    std::vector<at::Tensor> codec_embedding;  // [residual codes][vocab, hidden]
    std::vector<at::Tensor> lm_head;          // [residual codes][vocab, hidden]
    // The heads' packed copies for the decode kernels (null entries where not packed; the
    // decoder's layers carry their own, qwen3_weights.h).
    std::vector<engine::cpu::PackedWeightPtr> lm_head_packed;
};

class CodePredictor final : public engine::DepthModel {
  public:
    // Loads `talker.code_predictor.*`; `talker_codec_embedding` is the talker's codec_embedding
    // table [talker vocab, hidden] in `dtype` (embeds c0 at position 1). Errors name the tensor.
    [[nodiscard]] static Result<std::unique_ptr<CodePredictor>> create(
        const TalkerConfig& config, const qwen3::WeightLookup& lookup,
        at::Tensor talker_codec_embedding, at::ScalarType dtype, at::Device device);

    [[nodiscard]] int num_codes() const override;
    [[nodiscard]] std::int64_t vocab_size(int depth) const override;
    [[nodiscard]] Result<at::Tensor> begin_frame(const at::Tensor& hidden,
                                                 std::span<const std::int32_t> tokens) override;
    [[nodiscard]] Result<at::Tensor> next(int depth,
                                          std::span<const std::int32_t> previous) override;
    void end_frame() override;

    // The talker's next input embedding from one frame (without the text part), [hidden] in the
    // model dtype. `codes` are c1 .. c15.
    [[nodiscard]] at::Tensor feedback_sum(std::int32_t c0,
                                          std::span<const std::int32_t> codes) const;

    // The talker's codec_embedding table [talker vocab, hidden] (model dtype).
    [[nodiscard]] const at::Tensor& talker_codec_embedding() const {
        return talker_codec_embedding_;
    }

    // The scratch KV of the current frame is empty (tests: end_frame() freed it).
    [[nodiscard]] bool frame_free() const { return keys_.empty(); }

  private:
    CodePredictor(const TalkerConfig& config, CodePredictorWeights weights,
                  at::Tensor talker_codec_embedding, at::ScalarType dtype, at::Device device);
    // Runs positions [position, position + x.size(1)) of x [R, T, H]; returns the final-normed
    // last position [R, H].
    [[nodiscard]] at::Tensor run(at::Tensor x, std::int64_t position);
    [[nodiscard]] at::Tensor ids_tensor(std::span<const std::int32_t> ids) const;

    qwen3::Qwen3Config config_;  // the predictor's decoder
    CodePredictorWeights weights_;
    at::Tensor talker_codec_embedding_;
    at::ScalarType dtype_;
    at::Device device_;
    qwen3::DefaultRotaryEmbedding rotary_;
    std::int64_t max_length_;       // positions per frame: num_code_groups
    at::Tensor cos_, sin_;          // RoPE tables of positions [0, max_length), float32
    std::vector<at::Tensor> keys_;  // per layer [R, max_length, kv_heads, d] while a frame runs
    std::vector<at::Tensor> values_;
    std::int64_t length_ = 0;  // positions of the current frame so far
    std::int64_t rows_ = 0;
};

}  // namespace omnirt::models::qwen3_omni

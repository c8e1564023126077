#pragma once
// The S2-Pro Dual-AR model for the AR engine (fact sheet sections 4-6):
//   slow AR   qwen3::Qwen3Model over `text_model.model.*` (the shared decoder stack), answered
//             from the fish names by fish_stack_lookup() (q / k rows de-interleaved) with
//             FishRotaryEmbedding (bf16-rounded table); tied head = embeddings, restricted to
//             the rows of <|im_end|> and the semantic ids (Qwen3ModelOptions::logit_rows: every
//             other logit is -inf, the section 4.5 constraint)
//   fast AR   FastAr (fast_ar.h), the engine's depth model
//   codebook embedding (`audio_decoder.codebook_embeddings.weight`): the slow AR's input at
//             reference frames and at every fed-back frame, made by FrameEmbedder
//
// Thread safety: create functions on any thread; the models are driven by the engine thread;
// FrameEmbedder is immutable (any thread).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <span>

#include "core/error.h"
#include "models/qwen3/qwen3_model.h"
#include "models/s2_pro/config.h"
#include "models/s2_pro/fast_ar.h"

namespace omnirt::models::s2_pro {

// x = (E_text[id] + sum_k E_cb[k * codebook_size + c_k]) / sqrt(num_codebooks + 1) (section 4.3;
// fish-speech's scale_codebook_embeddings), summed in float32, returned in the model dtype.
class FrameEmbedder {
  public:
    FrameEmbedder(const S2ProConfig& config, at::Tensor text_embeddings,
                  at::Tensor codebook_embeddings);
    // [frames, dim] for frames of ids [frames] and codes [frames, num_codebooks] (int64, any
    // device). Codes must be in [0, codebook_size) (callers check).
    [[nodiscard]] at::Tensor embed(const at::Tensor& ids, const at::Tensor& codes) const;
    [[nodiscard]] const S2ProConfig& config() const { return config_; }

  private:
    S2ProConfig config_;
    at::Tensor text_;       // [vocab, dim] model dtype
    at::Tensor codebooks_;  // [num_codebooks * codebook_size, dim] model dtype
};

struct S2ProModel {
    std::unique_ptr<qwen3::Qwen3Model> slow;
    std::unique_ptr<FastAr> fast;
    std::shared_ptr<const FrameEmbedder> embedder;
};

// Loads both ARs through `lookup` (fish names, e.g. a Checkpoint's). Errors name the tensor
// (not_found, invalid_argument for a wrong shape); unimplemented for a slow AR without q/k norms.
[[nodiscard]] Result<S2ProModel> load_s2_pro_model(const S2ProConfig& config,
                                                   const qwen3::WeightLookup& lookup,
                                                   at::ScalarType dtype, at::Device device);

}  // namespace omnirt::models::s2_pro

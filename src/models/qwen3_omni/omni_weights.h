#pragma once
// Every tensor of a Qwen3-Omni-MoE checkpoint as the released safetensors name them (no
// top-level prefix; experts stored one by one):
//
//   thinker.audio_tower.*   audio encoder          thinker.visual.*   vision encoder + mergers
//   thinker.model.*         thinker MoE decoder    thinker.lm_head.weight
//   talker.model.*          talker MoE decoder (codec_embedding, shared experts)
//   talker.codec_head.weight, talker.{text,hidden}_projection.*, talker.code_predictor.*
//   code2wav.*              codec decoder
//
// The talker and code2wav tensors are listed only when the config has them.
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dummy.h"
#include "checkpoint/tensor_check.h"
#include "models/qwen3_omni/omni_config.h"

namespace omnirt::models::qwen3_omni {

// In module order. invalid_argument (naming the key) for a sub-config missing a size.
[[nodiscard]] Result<std::vector<checkpoint::ExpectedTensor>> omni_expected_tensors(
    const OmniConfig& config);

// The same as dummy specs of `dtype`: norm scales centred on 1, everything else on 0.
[[nodiscard]] Result<std::vector<checkpoint::TensorSpec>> omni_tensor_specs(
    const OmniConfig& config, DType dtype);

// ok when the checkpoint holds exactly the expected tensors; failed_precondition listing the
// missing, wrong-shape and unexpected ones otherwise.
[[nodiscard]] Status check_omni_checkpoint(const OmniConfig& config,
                                           const checkpoint::Checkpoint& checkpoint);

}  // namespace omnirt::models::qwen3_omni

#pragma once
// The Qwen3-Omni thinker's text decoder: Qwen3Model over the `thinker.` tensors with the
// interleaved M-RoPE of thinker_config.text_config.rope_scaling (or rope_parameters). Media
// embeddings, DeepStack additions and 3-D positions reach it through engine::SequenceInput.
#include <memory>

#include "core/error.h"
#include "models/qwen3/qwen3_model.h"
#include "models/qwen3_omni/omni_config.h"

namespace omnirt::models::qwen3_omni {

// The M-RoPE sections (T, H, W) of a text config: rope_scaling.mrope_section, summing to
// head_dim / 2. invalid_argument when absent or inconsistent.
[[nodiscard]] Result<std::array<int, 3>> mrope_sections(const qwen3::Qwen3Config& text);

// Loads the thinker. `options.weight_prefix` and `options.rotary` are set here.
[[nodiscard]] Result<std::unique_ptr<qwen3::Qwen3Model>> load_thinker(
    const OmniConfig& config, const qwen3::WeightLookup& lookup,
    qwen3::Qwen3ModelOptions options = {});

}  // namespace omnirt::models::qwen3_omni

#pragma once
// The `qwen3_omni.thinker` stage factory: the Qwen3-Omni thinker's text decoder (thinker.*
// tensors, thinker_config.text_config, interleaved M-RoPE) on the AR engine, served like
// qwen3.thinker (the same factory_args, docs in models/qwen3/thinker_stage.h), with the media
// embeddings, DeepStack additions and 3-D positions of thinker_inputs.h taken from each request.
#include "core/error.h"
#include "core/registry.h"

namespace omnirt::models::qwen3_omni {

// Registers `qwen3_omni.thinker` (FunctionKind::factory). Idempotent.
[[nodiscard]] Status register_thinker_stage(Registry& registry = Registry::global());

}  // namespace omnirt::models::qwen3_omni

#pragma once
// `qwen3_omni.talker`: Qwen3-Omni's talker on the AR engine (docs/models/qwen3_omni.md, "Speech"):
// the talker decoder (MoE with a shared expert, M-RoPE) as the model, the code predictor as the
// depth model, TalkerRole (talker_role.h) as the role. Each step makes one 80 ms frame of 16
// codes per sequence; frames stream to the stage's stream_to (code2wav) as `codes` [16].
//
// Input: the payload of qwen3_omni.project_to_talker (data.input_ids, data.positions of the
// thinker prompt), and the thinker's stream (accept_streams). Output: the engine's chunks to the
// stream targets (never to the client) and its result (codes [frames, 16], finish_reason, usage).
//
// factory_args (model_path is required; runtime prep injects the pipeline's model_path):
//   dtype                 float32 (default) or bfloat16
//   block_size, max_total_tokens, max_running_requests, max_prefill_tokens  as qwen3.thinker
//                         (16, 16384, 64, 2048)
//   max_frames            frames per request at most (4096, transformers' talker_max_new_tokens)
//   temperature, top_k, top_p, repetition_penalty   the talker's sampling (0.9, 50, 1.0, 1.05:
//                         transformers' generate defaults); a request overrides them with
//                         params.stage_sampling.<stage> only (the client's sampling is the text's)
//   seed, load_format (auto / dummy), dummy_seed, num_threads   as qwen3.thinker
//
// Thread safety: the factory may run on any thread; the scheduler is an ArScheduler.
#include <memory>

#include "core/error.h"
#include "core/registry.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::qwen3_omni {

[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_talker_stage(
    const pipeline::StageContext& context);

// Registers `qwen3_omni.talker`. Idempotent.
[[nodiscard]] Status register_talker_stage(Registry& registry = Registry::global());

}  // namespace omnirt::models::qwen3_omni

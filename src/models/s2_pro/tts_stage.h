#pragma once
// `s2_pro.tts`: S2-Pro's slow AR on the AR engine with the fast AR as its depth model and
// S2ProRole (tts_role.h). Each step makes one frame (2048 samples at 44.1 kHz) per sequence:
// the semantic token and its 10 codes, fed back as the next input.
//
// Input: data.input_ids, data.vq_positions, data.vq_codes (the prompt of prompt.h). Output: the
// engine's result (codes [frames, 11], output_ids, finish_reason, usage) and, per frame, stream
// chunks with `codes` to the stage's stream targets (to the client when it has none).
//
// factory_args (model_path is required; runtime prep injects the pipeline's model_path):
//   dtype                 float32 (default) or bfloat16
//   block_size, max_total_tokens, max_running_requests, max_prefill_tokens  (16, 32768, 64,
//                         8192: SGLang-Omni's chunked prefill size)
//   max_new_tokens        frames per request at most when the request says nothing (1024)
//   temperature, top_p, top_k   the semantic token's sampling (0.8, 0.8, 30: fish-speech's HTTP
//                         defaults); a request overrides them with params.sampling
//   depth_temperature, depth_top_p, depth_top_k   the residual codes' (the same defaults)
//   seed, load_format (auto / dummy), dummy_seed, num_threads
//
// Thread safety: the factory may run on any thread; the scheduler is an ArScheduler.
#include <memory>

#include "core/error.h"
#include "core/registry.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::s2_pro {

[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_tts_stage(
    const pipeline::StageContext& context);

// Registers `s2_pro.tts`. Idempotent.
[[nodiscard]] Status register_tts_stage(Registry& registry = Registry::global());

}  // namespace omnirt::models::s2_pro

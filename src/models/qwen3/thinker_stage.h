#pragma once
// The `qwen3.thinker` stage factory: a Qwen3 / Qwen3-MoE text model (Qwen3Model) behind the AR
// engine (engine::ArScheduler), with the checkpoint's tokenizer for chat prompts and streamed
// text. One stage answers OpenAI chat requests end to end (docs/engine.md, "qwen3.thinker").
//
// factory_args (model_path is required; runtime prep injects the pipeline's model_path):
//   model_path            checkpoint directory: config.json, weights, tokenizer.json, and
//                         optionally generation_config.json
//   dtype                 "float32" (default), "bfloat16" or "float16" (CUDA only): weights,
//                         activations and KV cache
//   block_size            KV block size (16)
//   max_total_tokens      KV cache positions (16384), rounded down to whole blocks
//   max_running_requests  256
//   max_prefill_tokens    prompt positions per step (2048)
//   enable_prefix_cache   true
//   enable_thinking       true (false renders Qwen3's empty <think></think> block)
//   stream_hidden         false (last hidden state in the chunks to stream_to stages)
//   seed                  seeds unseeded requests (0 = random)
//   load_format           "auto" (default; the checkpoint's safetensors) or "dummy": seeded random
//                         weights at the config's real sizes (only config.json is read;
//                         tokenizer.json is optional then, prompts come as data.input_ids)
//   dummy_seed            the seed of dummy weights (0); the same seed, the same weights
//   num_threads           ATen intra-op threads of the process (0: OMP_NUM_THREADS when set, else
//                         every CPU the process may run on); process-wide
//   tp_timeout_s          tensor parallelism (tp_size > 1): how long the ranks wait for each
//                         other to join and in any one collective (300)
//
// With tp_size > 1 each rank loads its shard of the weights (qwen3_weights.h) and the ranks'
// ArSchedulers run in lockstep over a c10d group on the stage's rendezvous (tensor_parallel.h,
// engine/lockstep.h; docs/engine.md, "Tensor parallelism").
//
// Loading at least 64 MiB of weights shows progress (bytes and tensors) on stderr.
//
// Input: data.input_ids (a preprocessing stage's), or else request.inputs.messages (rendered with
// the Qwen3 ChatML template and tokenized; text parts only: media needs the Qwen3-Omni encoders)
// or request.inputs.prompt (a string, tokenized as it is). Output: the ArScheduler's chunks and
// result ({"text", "finish_reason", "usage", "output_ids"}). Sampling defaults (temperature,
// top_p, top_k, repetition_penalty) and EOS ids come from generation_config.json (EOS from
// config.json without it), overridable per request (sampling_params.h).
//
// Thread safety: the factory may run on any thread; the scheduler it returns is an ArScheduler.
#include <cstdint>
#include <memory>
#include <vector>

#include <functional>
#include <string>

#include "core/error.h"
#include "core/registry.h"
#include "core/request.h"
#include "engine/text_role.h"
#include "models/qwen3/config.h"
#include "models/qwen3/rotary_embedding.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::qwen3 {

// Registers `qwen3.thinker` (FunctionKind::factory). Idempotent: an existing entry is kept.
[[nodiscard]] Status register_qwen3_stages(Registry& registry = Registry::global());

[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_thinker_stage(
    const pipeline::StageContext& context);

// A model built on the same decoder served the same way (Qwen3-Omni's thinker): where its config
// and tensors sit in the checkpoint, its rotary embedding, and what its requests carry besides
// the prompt. The defaults are qwen3.thinker's.
struct ThinkerStageVariant {
    std::string factory_name = "qwen3.thinker";  // starts error messages
    std::string config_pointer;                  // WeightSourceOptions::config_pointer
    std::string weight_prefix;                   // "thinker."
    // null: the text RoPE.
    std::function<Result<std::unique_ptr<RotaryEmbedding>>(const Qwen3Config&, at::Device)> rotary;
    // What requests carry besides the prompt, given the loaded text config; may be empty.
    std::function<engine::ExtendSetupFn(const Qwen3Config&)> extend_setup;
    // Each request's stream targets (a subset of the stage's stream_to); null: all of them.
    engine::StreamTargetsFn stream_targets_for;
    // Fields of the stream chunks besides the token's; null: none.
    engine::TokenFieldsFn token_fields;
};
[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_thinker_stage(
    const pipeline::StageContext& context, const ThinkerStageVariant& variant);

}  // namespace omnirt::models::qwen3

#pragma once
// The Qwen3-Omni encoder stages of the understanding pipeline (docs/models/qwen3_omni.md, "Stage
// payloads"): SimpleSchedulers whose batch compute (EncoderBatcher, encoder_batch.h) runs every
// media item of every request of a batch through one encoder forward, with a content-keyed
// output cache (EncoderCache, encoder_cache.h).
//
// `qwen3_omni.image_encoder` (VisionEncoder, weights `thinker.visual.*`):
//   in   data.items: list of {key int, pixel_values f32 [t*h*w, 1536], grid_thw i64 [3]}
//   out  data.items: list of {key, embeddings f32 [t*h*w/4, H], deepstack: list of 3 f32
//        [t*h*w/4, H]}, same order
// `qwen3_omni.audio_encoder` (AudioEncoder, weights `thinker.audio_tower.*`):
//   in   data.items: list of {key int, mel f32 [128, T]}
//   out  data.items: list of {key, embeddings f32 [audio_output_length(T), H]}, same order
// Input tensors are read in place (CPU); outputs are new float32 tensors whatever the compute
// dtype. A malformed request (no items, an item that is not a map, a missing field, a wrong
// dtype or shape, rows != t*h*w, a grid the encoder cannot run, more rows than the limit) fails
// alone with invalid_argument naming the item ("data.items[2]: ..."); the rest of its batch runs.
//
// factory_args (model_path is required; runtime prep injects the pipeline's model_path):
//   model_path           checkpoint directory (config.json and the safetensors)
//   dtype                "float32" (default) or "bfloat16": weights and activations
//   max_batch_size       requests per batch (8)
//   max_batch_wait_us    how long a batch waits for more requests after its first (2000)
//   cache_bytes          output cache capacity in bytes (256 MiB; 0 turns the cache off)
//   num_threads          ATen intra-op threads of the process (0: OMP_NUM_THREADS when set,
//                        else every CPU the process may run on); process-wide
//   max_rows_per_item    image encoder: patches (pixel_values rows) of one item (65536)
//   max_frames_per_item  audio encoder: mel frames of one item (180000, 30 minutes)
//   load_format          "auto" (the checkpoint's safetensors) or "dummy": only config.json is
//                        read and the weights are generated at its sizes (checkpoint/dummy.h)
//   dummy_seed           the dummy weights' seed (0)
//
// Threads: one worker computes; the factory may run on any thread.
#include <memory>

#include "core/error.h"
#include "core/registry.h"
#include "models/qwen3_omni/encoder_batch.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::qwen3_omni {

// Registers both factories (FunctionKind::factory, model_path injectable). Idempotent: existing
// entries are kept.
[[nodiscard]] Status register_encoder_stages(Registry& registry = Registry::global());

// The factories; `hooks` observe the stage (tests, metrics).
[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_image_encoder_stage(
    const pipeline::StageContext& context, EncoderStageHooks hooks = {});
[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_audio_encoder_stage(
    const pipeline::StageContext& context, EncoderStageHooks hooks = {});

}  // namespace omnirt::models::qwen3_omni

#pragma once
// The torch-free stages and request-aware functions of the Qwen3-Omni understanding pipeline
// (configs/qwen3_omni_thinker.yaml; payloads in docs/models/qwen3_omni.md, "Stage payloads"):
//
//   qwen3_omni.preprocessing              factory: preprocessing.h per request (SimpleScheduler;
//                                         args model_path, use_audio_in_video (false),
//                                         max_media_items (16), remote_max_bytes (64 MiB),
//                                         remote_timeout_ms (10000), worker_threads (2); the
//                                         request's params.stage_params.<stage>.use_audio_in_video
//                                         wins)
//   qwen3_omni.mm_aggregate               factory: passes the merged payload on
//   qwen3_omni.route_by_modality          route: mm_aggregate, plus image_encoder / audio_encoder
//                                         when the request has items for them
//   qwen3_omni.project_to_image_encoder   projection: {"items": image_items}
//   qwen3_omni.project_to_audio_encoder   projection: {"items": audio_items}
//   qwen3_omni.project_to_aggregate       projection: the payload without the encoder inputs
//   qwen3_omni.active_encoders            wait_for: the preprocessing stage and the encoders its
//                                         payload names
//   qwen3_omni.merge_for_thinker          merge: thinker input (input_ids, positions,
//                                         rope_delta, mm_runs, deepstack_runs)
//
// Thread safety: the factories and functions may run on any thread.
#include "core/error.h"
#include "core/registry.h"
#include "core/request.h"

namespace omnirt::models::qwen3_omni {

// Registers everything above. Idempotent.
[[nodiscard]] Status register_omni_stages(Registry& registry = Registry::global());

// The merge function, exposed for tests.
[[nodiscard]] Result<StagePayload> merge_for_thinker(
    const std::string& request_id,
    const std::map<std::string, std::shared_ptr<const StagePayload>>& inputs);

}  // namespace omnirt::models::qwen3_omni

#pragma once
// What the mm_aggregate stage hands the Qwen3-Omni thinker besides the prompt (the payload
// contract in docs/models/qwen3_omni.md, "Stage payloads"), read into the engine's RequestSetup:
//
//   positions       i64 [3, n]      3-D M-RoPE positions of the prompt (n = prompt length)
//   rope_delta      int             decode positions are cache index + rope_delta
//   mm_runs         [{begin, values f32 [len, H], key}]        media embeddings replacing the
//                                                               placeholder rows
//   deepstack_runs  [{begin, values [3 x f32 [len, H]], key}]  DeepStack additions after
//                                                               decoder layers 1, 2, 3
//
// All optional: a text-only request has none (positions then default to the cache index). Keys
// (content hashes of the media) become the runs' content keys, so the prefix cache reuses KV
// only for identical media. Values are copied out of the payload (the engine keeps them while
// the request lives).
#include <cstdint>

#include "core/error.h"
#include "core/request.h"
#include "engine/ar_role.h"

namespace omnirt::models::qwen3_omni {

// Adds the payload's positions, embeddings and DeepStack runs to `setup` (whose prompt is read
// already). invalid_argument naming the field for anything malformed: wrong types or shapes,
// runs outside the prompt, overlapping runs, a width other than `hidden_size`, more DeepStack
// layers than `max_layers`.
[[nodiscard]] Status read_thinker_inputs(const StagePayload& payload, std::int64_t hidden_size,
                                         std::int32_t max_layers, engine::RequestSetup& setup);

}  // namespace omnirt::models::qwen3_omni

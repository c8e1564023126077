#pragma once
// The text stages around a Qwen3 thinker (configs/qwen3_chat.yaml): preprocessing before it and
// decoding after it. No libtorch: they are built into omnirt (runner::register_builtins), so the
// processes that host them need not load the model plugin.
//
// qwen3.preprocess (SimpleScheduler)
//   args: model_path (tokenizer.json is read from it), enable_thinking (bool, default true),
//         worker_threads (default 1)
//   in:   a request (prompt.h lists the layouts: chat messages, a prompt string or token ids).
//         request.params.stage_params.<stage>.enable_thinking overrides the arg per request.
//   out:  data = {"input_ids": i32 [n]}
//
// qwen3.decode (StreamingScheduler; its stream source is the thinker)
//   args: model_path
//   in:   the thinker's token chunks {"token_id", "text", "logprob"?, "top_logprobs"?} and its
//         result {"text", "finish_reason", "usage", "output_ids", ...}
//   out:  client chunks {"text": delta, "logprobs"?: [entry]} and the result {"text",
//         "finish_reason", "usage", "output_ids", "logprobs"?: [entry...]}, where an entry is
//         {"token": str, "logprob": float, "bytes": [int...], "top_logprobs": [{"token",
//         "logprob", "bytes"}...]} (the client output protocol, client/output.h). The text
//         deltas are the thinker's: it detokenizes because stop strings must end generation
//         where they appear, so this stage turns token ids into the strings and bytes of the
//         log probabilities and shapes what the client receives.
//
// Thread safety: the factories may run on any thread.
#include "core/error.h"
#include "core/registry.h"

namespace omnirt::models::qwen3 {

// Registers qwen3.preprocess and qwen3.decode (FunctionKind::factory). Idempotent.
[[nodiscard]] Status register_qwen3_text_stages(Registry& registry = Registry::global());

}  // namespace omnirt::models::qwen3

#pragma once
// `s2_pro.preprocess`: S2-Pro's preprocessing stage (fact sheet sections 3, 7.4, 11.2): the
// request's text and reference clips -> the prompt of prompt.h for s2_pro.tts.
//
// In: request.inputs
//   text         the text to speak (required; /v1/audio/speech's `input`)
//   references   optional list of {text: string, and one of
//                  audio: an encoded file (bytes: wav, flac, ogg, mp3, ...) or samples (a float /
//                         int16 tensor [n] or [channels, n], with sample_rate, default 44100),
//                  vq_codes: the clip's codes, an integer tensor [10, frames] or a list of 10
//                            lists of ints (encoding skipped)}
//   Audio is mixed to mono, resampled to 44.1 kHz (libsoxr) and encoded with the codec
//   (codec_encoder.h); at most max_reference_seconds per clip.
// Out: data {input_ids i32 [P], vq_positions i64 [n], vq_codes i32 [n * 10]}; the request is
//   passed on unchanged (its params.max_tokens / sampling reach s2_pro.tts).
//
// factory_args: model_path (tokenizer.json and codec.safetensors are read from it; required),
//   prompt_style ("sglang", default, or "fish_speech"), max_reference_seconds (60),
//   worker_threads (1), num_threads (0). Errors in a request are invalid_argument naming the field
//   (inputs.references[1].audio: ...).
//
// Threads: the SimpleScheduler's workers run the compute function; the encoder is shared
// read-only; the factory may run on any thread.
#include <memory>

#include "core/error.h"
#include "core/registry.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::s2_pro {

[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_preprocess_stage(
    const pipeline::StageContext& context);

// Registers `s2_pro.preprocess`. Idempotent.
[[nodiscard]] Status register_preprocess_stage(Registry& registry = Registry::global());

}  // namespace omnirt::models::s2_pro

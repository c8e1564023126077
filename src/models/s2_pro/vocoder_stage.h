#pragma once
// `s2_pro.vocoder`: S2-Pro's streaming vocoder stage (fact sheet sections 7.3, 11.5). A
// StreamingScheduler that turns the s2_pro.tts stream of frames into 44.1 kHz audio chunks for
// the client, incrementally: each request keeps a CodecDecoder::DecodeState, so every frame is
// decoded once (SGLang re-decodes everything accumulated at every stream boundary) and the
// concatenated chunks equal one decode of all frames.
//
// Input, per request:
//   stream chunks whose data holds `codes`: an int32 / int64 CPU tensor [11] (one frame as the
//   engine streams it: the semantic token, then c_0 .. c_9) or [10] (c_0 .. c_9), or [frames, 11]
//   / [frames, 10]; codes past a codebook are clamped by the codec (section 7.3);
//   the request payload (its data is not read); before or after the chunks.
// Output:
//   client stream chunks {"audio": float32 [samples], "sample_rate": 44100}: the first once
//   first_chunk_frames frames are buffered (a short first chunk for a low time to first audio),
//   then chunks of twice the frames of the one before, up to chunk_frames (so each is decoded
//   while the audio before it plays), the remainder when the streams are done;
//   the result {"sample_rate": 44100, "samples", "frames", "usage" (the payload's, i.e. the tts
//   stage's token counts, when it has one)}.
//
// Errors: a malformed chunk (no `codes`, not an integer tensor, another width) fails its request
// with invalid_argument naming the chunk; the stage keeps serving the others.
//
// factory_args: model_path (required unless load_format is dummy; runtime prep injects it),
// first_chunk_frames (5, as SGLang's stream_stride), chunk_frames (25), num_threads (0: every
// CPU, or 1 for a codec narrower than torch_bridge::kNarrowModelWidth),
// load_format (auto: the codec of model_path, codec.safetensors or codec.pth (codec_decoder.h);
// dummy: seeded dummy weights of codec_preset's sizes, "release" by default, for benchmarks),
// dummy_seed (0), dtype ("float32" (default) or "bfloat16": the codec's compute precision,
// codec_decoder.h; the audio is float32 either way). On the CPU.
//
// Threads: the scheduler's one worker decodes; the factory may run on any thread.
#include <memory>

#include "core/error.h"
#include "core/registry.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::s2_pro {

[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_vocoder_stage(
    const pipeline::StageContext& context);

// Registers `s2_pro.vocoder`. Idempotent.
[[nodiscard]] Status register_vocoder_stage(Registry& registry = Registry::global());

}  // namespace omnirt::models::s2_pro

#pragma once
// `qwen3_omni.code2wav`: the streaming vocoder stage of the speech pipeline
// (docs/models/qwen3_omni.md, qwen3-omni.md §7.3). A StreamingScheduler that turns the talker's
// stream of codec frames into a stream of 24 kHz audio chunks for the client.
//
// Input, per request:
//   stream chunks (from any stream source, normally the talker) whose data holds `codes`: an
//   int32 or int64 CPU tensor [frames, num_quantizers] or [num_quantizers] (one frame). A frame
//   whose first code is the codec EOS (talker_config.codec_eos_token_id, 2150 when absent) is
//   skipped; every other code must be in [0, codebook_size).
//   the request payload (its data is not read); it may arrive before or after the chunks.
// Output:
//   client stream chunks {"audio": float32 [samples], "sample_rate": 24000}, one per decoded
//   chunk, in order;
//   the result {"sample_rate": 24000, "samples": total samples emitted, "frames": frames kept}.
//
// Chunking (code2wav_stream_chunks): the first chunk holds first_chunk_frames new frames (a
// short first chunk for a low time to first audio), every later one chunk_frames; a chunk is
// ready as soon as its frames are buffered, the remainder when the request is done. A chunk
// decodes frames [begin - context, end) with context = min(left_context_frames, begin) and drops
// the context's samples, as Code2Wav::decode_chunk does. The concatenated audio therefore equals
// decode_chunk over the same plan called directly (float rounding only: tested within 1e-5).
//
// Batching: the ready chunks of up to max_batch_streams requests are decoded in ONE forward
// (StreamingScheduler's on_step runs once the inbox is drained, so every chunk that arrived
// meanwhile joins). Rows of different lengths are right-padded with code 0 to the longest and
// each row keeps samples [context * total_upsample, output_samples(its frames)): Code2Wav is
// causal end to end (left-padded convolutions, CausalTransConv cut at both ends, attention to
// earlier keys only, RoPE positions from 0 in every row), so the padding behind a row changes
// none of the samples it keeps. One chunk per request per forward, requests with fewer chunks
// sent first (a new stream's first chunk is not held behind the others' backlog), then the
// oldest; audio chunks carry metadata {"batch_rows": rows of their forward}.
//
// Errors: a malformed chunk (no `codes`, not a tensor, wrong dtype or shape, a code out of
// range) fails its request with invalid_argument naming the chunk and the field, before any
// forward; the stage keeps serving the others. A forward failure (internal) fails the requests of
// that batch. An aborted request's state is freed at once (StreamingScheduler) and it leaves the
// next batch.
//
// Not done yet: the stage runs on the CPU only, where batching measured slower than one row
// per forward (docs/benchmarks.md "Qwen3-Omni speech": set max_batch_streams 1 there); padded
// rows cost compute (a batch costs rows x longest frames), no grouping by length.
//
// factory_args (model_path is required; runtime prep injects the pipeline's model_path):
//   model_path           checkpoint directory (config.json and the safetensors)
//   dtype                "float32" (default) or "bfloat16": weights and activations
//   chunk_frames         new frames per chunk after the first (25), in [1, 100000]
//   first_chunk_frames   new frames of the first chunk (10), in [1, 100000]
//   left_context_frames  frames decoded again in front of a chunk and dropped (25), [0, 100000]
//   max_batch_streams    most requests whose chunks share one forward (8), in [1, 256]; 1 decodes
//                        one chunk per forward
//   load_format          "auto" / "safetensors" (the checkpoint) or "dummy": only config.json is
//                        read and the weights are generated at its sizes (checkpoint/dummy.h)
//   dummy_seed           the dummy weights' seed (0)
//   num_threads          ATen intra-op threads of the process (0: OMP_NUM_THREADS when set,
//                        else every CPU the process may run on); process-wide
//
// Threads: the scheduler's one worker decodes (ATen's intra-op threads inside a forward); the
// factory may run on any thread.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/registry.h"
#include "models/qwen3_omni/code2wav_config.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::qwen3_omni {

inline constexpr std::int64_t kCode2WavSampleRate = 24000;
// talker_config.codec_eos_token_id of the released checkpoint.
inline constexpr std::int64_t kDefaultCodecEosId = 2150;

// The stage's chunking plan for `frames` frames: the first chunk first_chunk_frames new frames,
// then chunk_frames each (the last one shorter), each with context = min(left_context, begin).
// Empty for frames <= 0. Sizes >= 1 and left_context >= 0 are the caller's to check.
[[nodiscard]] std::vector<Code2WavChunk> code2wav_stream_chunks(std::int64_t frames,
                                                                std::int64_t first_chunk_frames,
                                                                std::int64_t chunk_frames,
                                                                std::int64_t left_context);

// The factory.
[[nodiscard]] Result<std::unique_ptr<pipeline::Scheduler>> make_code2wav_stage(
    const pipeline::StageContext& context);

// Registers `qwen3_omni.code2wav` (FunctionKind::factory, model_path injectable). Idempotent: an
// existing entry is kept.
[[nodiscard]] Status register_code2wav_stage(Registry& registry = Registry::global());

}  // namespace omnirt::models::qwen3_omni

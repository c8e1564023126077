#pragma once
// The factory arguments every stage that runs a model on the AR engine shares (model_path,
// dtype, KV cache and batch sizes, seeds, load format, threads, the sampling defaults), read
// once here so the stage factories of the model families agree on names, ranges and messages.
// Each family passes its own defaults; errors are invalid_argument "<who>: arg '<key>' ...".
//
// Args read (defaults from ArStageArgDefaults where not given):
//   model_path (required), dtype (float32 | bfloat16; float32), block_size [1, 1024] (16),
//   max_total_tokens [block_size, 2^30], max_running_requests [1, 4096] (64),
//   max_prefill_tokens [1, 2^20], seed (0), load_format (auto), dummy_seed [0, 2^63) (0),
//   num_threads [0, 1024] (0); sampling: <prefix>temperature, <prefix>top_k [-1, 2^20],
//   <prefix>top_p, and <prefix>repetition_penalty where the defaults have one; the frame or
//   token limit under the defaults' max_tokens_arg, [1, 2^20].
//
// Thread safety: pure functions of their arguments.
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "engine/sampling_params.h"
#include "pipeline/stage_factory.h"

namespace omnirt::engine {

struct SamplingArgDefaults {
    double temperature = 1.0;
    std::int64_t top_k = -1;
    double top_p = 1.0;
    std::optional<double> repetition_penalty;  // read only when set
};

struct ArStageArgDefaults {
    std::int64_t max_total_tokens = 32768;
    std::int64_t max_prefill_tokens = 8192;
    std::string max_tokens_arg = "max_new_tokens";  // the arg of the per-request limit
    std::int64_t max_tokens = 1024;
    SamplingArgDefaults sampling;
};

struct ArStageArgs {
    std::string model_path;
    DType dtype = DType::f32;  // f32 or bf16
    std::int64_t block_size = 16;
    std::int64_t max_total_tokens = 0;
    std::int64_t max_running_requests = 0;
    std::int64_t max_prefill_tokens = 0;
    std::int64_t max_tokens = 0;
    std::uint64_t seed = 0;
    std::string load_format;
    std::uint64_t dummy_seed = 0;
    std::int64_t num_threads = 0;
    SamplingParams sampling;  // with max_tokens as its limit

    [[nodiscard]] std::int64_t num_kv_blocks() const { return max_total_tokens / block_size; }
};

// `who` starts error messages ("s2_pro.tts stage 'tts'").
[[nodiscard]] Result<ArStageArgs> parse_ar_stage_args(const pipeline::StageContext& context,
                                                      const std::string& who,
                                                      const ArStageArgDefaults& defaults);

// The sampling args under `prefix` ("" or e.g. "depth_"), limited to `max_tokens`.
[[nodiscard]] Result<SamplingParams> parse_sampling_args(const pipeline::StageContext& context,
                                                         const std::string& who,
                                                         const std::string& prefix,
                                                         const SamplingArgDefaults& defaults,
                                                         std::int64_t max_tokens);

}  // namespace omnirt::engine

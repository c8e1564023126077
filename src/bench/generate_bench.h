#pragma once
// `omnirt bench generate`: prefill and decode speed of a model family's autoregressive model on
// the AR engine, next to the memory-bandwidth roofline measured in the same run.
//
// The model runs in this process: a one-stage pipeline (the family's ar_stage_factory, terminal)
// started with the in-process placement, its factory coming from the family's plugin (the omnirt
// binary does not link libtorch). The family is the checkpoint's (its config.json) or, with a
// preset, --arch (default: the default family); models/family.h. For each batch size B, B requests
// are submitted at once, each with its own seeded random prompt of input_len token ids
// (data.input_ids; the prefix cache is off) and max_tokens = output_len with ignore_eos and greedy
// sampling; every client stream chunk (one per generated token) is timestamped on arrival.
//
//   TTFT               submit -> first token, per request (p50 and max over the batch)
//   steady window      from the moment every request has its first token to the moment the
//                      first one ends: all B sequences decode in every step, no prefill
//   decode tok/s       per request: (tokens in the window - 1) / (its last - its first token in
//                      the window); the median over the batch. Aggregate: their sum. Batches
//                      without a window (B = 1, or prefill overlapping everything) use each
//                      request's whole decode (first token to last).
//   step ms            B / aggregate
//   roofline           weight bytes one decode step reads / read bandwidth (the family's
//                      DecodeFootprint): every layer weight, the final norm and lm_head (the tied
//                      embedding), B rows of the embedding, for MoE the routed experts (at most
//                      min(experts, B * top_k) per layer).
//                      "+KV" adds the keys and values read at the window's mean context.
//   % of roofline      roofline step ms (weights only) / step ms
//
// Threads: the stage's num_threads (ATen intra-op threads) is --threads, by default
// default_compute_threads() (OMP_NUM_THREADS, else the CPUs of the process); the read bandwidth
// is measured with as many threads, over a buffer of 1 GiB (32 times this machine's last-level
// cache), before the model loads.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::bench {

struct GenerateBenchOptions {
    std::string model_path;   // a checkpoint directory, or
    std::string preset;       // a preset of the family (config only; load_format dummy)
    std::string arch;         // the family of a preset; empty: the default family
    std::string load_format;  // "" = auto for model_path, dummy for preset
    std::string dtype = "bfloat16";
    std::vector<int> batches = {1, 8, 32};
    int input_len = 512;
    int output_len = 128;
    std::uint64_t seed = 0;  // prompts and dummy weights
    int threads = 0;         // engine and bandwidth threads; 0: default_compute_threads()
    std::int64_t max_prefill_tokens = 2048;
    std::string plugin;  // the family's plugin; empty: <dir of this executable>/../lib/...
    std::size_t bandwidth_bytes = 0;  // 0: 1 GiB
    // -1: the stage runs on CPU; N >= 0: on cuda:N (the stage's `gpu: N`; needs a CUDA libtorch).
    // The roofline still divides by the host read bandwidth measured here, not the GPU's.
    int gpu = -1;
};

struct GenerateBatchResult {
    int batch = 0;
    int failed = 0;
    double ttft_p50_ms = 0;
    double ttft_max_ms = 0;
    double decode_tps_per_request = 0;  // median over the batch
    double decode_tps_aggregate = 0;
    double step_ms = 0;
    bool steady_window = false;  // false: whole-decode rates (see above)
    double mean_context = 0;     // positions in the cache, mean over the measured steps
    double weight_bytes_per_step = 0;
    double kv_bytes_per_step = 0;
    double roofline_step_ms = 0;     // weights only
    double roofline_kv_step_ms = 0;  // weights + KV reads
    double roofline_share = 0;       // roofline_step_ms / step_ms
    double seconds = 0;              // the batch, submit to last completion
    // The read bandwidth again right after the batch (best of 2 passes): the host's bandwidth
    // can drift during a run; the roofline uses the report's probe, this shows the drift.
    double bandwidth_after_gbps = 0;
};

struct GenerateBenchReport {
    GenerateBenchOptions options;  // as run (load_format and plugin resolved)
    std::string model;             // DecodeFootprint::description
    std::uint64_t parameters = 0;
    int threads = 0;
    double bandwidth_gbps = 0;  // best pass
    double bandwidth_median_gbps = 0;
    std::size_t bandwidth_bytes = 0;
    double load_seconds = 0;  // pipeline start: weights loaded (or generated), KV cache allocated
    std::vector<GenerateBatchResult> batches;
};

// Fills in the default load_format and checks the options (invalid_argument naming the flag).
[[nodiscard]] Status check_generate_options(GenerateBenchOptions& options);
// check_generate_options(), then the run. Progress lines go to stderr.
[[nodiscard]] Result<GenerateBenchReport> run_generate_bench(GenerateBenchOptions options);
[[nodiscard]] std::string format_generate_table(const GenerateBenchReport& report);
[[nodiscard]] std::string generate_report_json(const GenerateBenchReport& report);
// "1,8,32" -> {1, 8, 32}; invalid_argument for anything but positive integers.
[[nodiscard]] Result<std::vector<int>> parse_batches(const std::string& text);

}  // namespace omnirt::bench

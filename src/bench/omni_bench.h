#pragma once
// `omnirt bench omni`: time to first token of the Qwen3-Omni understanding pipeline
// (configs/qwen3_omni_thinker.yaml, all stages in this process) with synthetic media, split by
// stage from the profiler's spans: preprocessing, each encoder, the aggregate, the thinker's
// forwards; the runtime's own share is what the stages' compute does not explain. Requests ask
// for one token (max_tokens 1), so their latency is their time to first token.
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "core/error.h"

namespace omnirt::bench {

struct OmniBenchOptions {
    std::string preset = "tiny";  // generated checkpoint, unless model_path is set
    std::string model_path;
    std::string config_path;  // empty: configs/qwen3_omni_thinker.yaml beside the build
    int images = 1;
    int image_width = 640;
    int image_height = 480;
    double audio_seconds = 0;
    std::string video_file;  // a video file sent with every request (none by default)
    int concurrency = 1;
    int requests = 20;
    int warmup = 2;
};

struct OmniBenchReport {
    OmniBenchOptions options;
    int measured = 0;
    int failed = 0;
    double ttft_p50_ms = 0;
    double ttft_mean_ms = 0;
    double requests_per_second = 0;
    double encoder_items_per_second = 0;  // media items encoded per second of the run
    // Mean milliseconds per request of each stage's compute ("preprocessing", "image_encoder",
    // "audio_encoder", "mm_aggregate", "thinker"), from the profiler's spans.
    std::map<std::string, double> stage_ms;
    double runtime_ms = 0;  // mean TTFT minus the stages' compute on the request's path
};

[[nodiscard]] Result<OmniBenchReport> run_omni_bench(const OmniBenchOptions& options);
[[nodiscard]] std::string format_omni_table(const OmniBenchReport& report);
[[nodiscard]] std::string omni_report_json(const OmniBenchReport& report);

// Milliseconds of "compute" and "forward" spans per stage, summed over the requests in
// `measured`, from the profiler's trace files in `dir` (Coordinator::start_profile). Also used by
// `omnirt bench speech`.
[[nodiscard]] std::map<std::string, double> stage_compute_ms(const std::filesystem::path& dir,
                                                             const std::set<std::string>& measured);

}  // namespace omnirt::bench

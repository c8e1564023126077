#pragma once
// `omnirt bench vad`: Silero VAD v5 and server_vad turn detection on one thread. Cases:
//   silero   SileroStream::process over `seconds` of 16 kHz audio, window by window
//   turn     TurnDetector::feed with 24 kHz (and 16 kHz) pcm16 in 20 ms pieces, as a realtime
//            client sends it (resampling included)
// plus the ceiling the network is compared with: reading its 1.2 MB of weights once per window
// at the single-thread read bandwidth measured in the same run for a buffer of that size (the
// kernels read every weight once per window; the rest of the work is in registers). Each case
// reports its real-time factor: audio duration / best time.
//
// Thread safety: any thread; runs on the calling thread only.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::bench {

struct VadBenchOptions {
    std::string model_path;  // empty: vad::default_model_path()
    double seconds = 60;     // audio per measured run
    int iterations = 5;      // measured runs per case; the best and the median are reported
    int warmup = 1;
};

struct VadBenchCase {
    std::string name;
    std::string detail;
    double best_ms = 0;
    double median_ms = 0;
    double realtime_factor = 0;  // audio seconds per second of compute (best run)
};

struct VadBenchReport {
    std::vector<VadBenchCase> cases;
    double load_ms = 0;  // SileroModel::load
    double audio_seconds = 0;
    std::int64_t windows = 0;  // per run
    double gflops = 0;         // of the best silero run (2 flops per multiply-add)
    int iterations = 0;
};

// invalid_argument for seconds outside [1, 3600], iterations < 1 or warmup < 0; the model
// loader's errors otherwise.
[[nodiscard]] Result<VadBenchReport> run_vad_bench(const VadBenchOptions& options);
[[nodiscard]] std::string format_vad_table(const VadBenchReport& report);
[[nodiscard]] std::string vad_report_json(const VadBenchReport& report);

}  // namespace omnirt::bench

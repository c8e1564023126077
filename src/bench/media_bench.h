#pragma once
// `omnirt bench media`: the media preprocessing of Qwen3-Omni on one thread. Cases:
//   image  a 1920x1080 JPEG (synthesised, quality 90, 4:2:0) -> decode -> smart_resize +
//          Pillow bicubic -> pixel_values (decode, resize and patchify also timed apart)
//   mel    30 s of 16 kHz audio -> 128-bin Whisper log-mel
//   video  (only with --video FILE) the file -> frames sampled at 2 fps -> pixel_values
// plus the ceiling the patch step is compared with: memcpy of the pixel_values bytes.
//
// Thread safety: any thread; runs on the calling thread only.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::bench {

struct MediaBenchOptions {
    int iterations = 20;  // measured runs per case; the best and the median are reported
    int warmup = 2;
    std::string video_path;  // optional
};

struct MediaBenchCase {
    std::string name;
    std::string detail;  // sizes, rows
    double best_ms = 0;
    double median_ms = 0;
};

struct MediaBenchReport {
    std::vector<MediaBenchCase> cases;
    int iterations = 0;
};

// invalid_argument for iterations < 1 or warmup < 0; the media functions' errors otherwise.
[[nodiscard]] Result<MediaBenchReport> run_media_bench(const MediaBenchOptions& options);
[[nodiscard]] std::string format_media_table(const MediaBenchReport& report);
[[nodiscard]] std::string media_report_json(const MediaBenchReport& report);

}  // namespace omnirt::bench

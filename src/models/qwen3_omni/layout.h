#pragma once
// The inputs of Qwen3-Omni's multimodal prompt layout: the special token ids and timing
// (LayoutConfig), the metadata of each media item as the processor reports it (grid, seconds
// per temporal grid, mel frame count) and the number of placeholder tokens each item expands to.
// Shared by placeholder expansion (placeholders.h) and the 3-D position ids (rope_index.h).
// Pure data and pure functions, safe from any thread.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/qwen3_omni/audio_output_length.h"
#include "models/qwen3_omni/grid.h"

namespace omnirt::models::qwen3_omni {

// Token ids and timing of the layout. Defaults are the Qwen3-Omni-30B-A3B checkpoint values
// (config.json thinker_config; the transformers class defaults differ and are wrong for it).
struct LayoutConfig {
    std::int64_t image_token_id = 151655;         // <|image_pad|>
    std::int64_t video_token_id = 151656;         // <|video_pad|>
    std::int64_t audio_token_id = 151675;         // <|audio_pad|>
    std::int64_t vision_start_token_id = 151652;  // <|vision_start|>
    std::int64_t vision_end_token_id = 151653;    // <|vision_end|>
    std::int64_t audio_start_token_id = 151669;   // <|audio_start|>
    std::int64_t audio_end_token_id = 151670;     // <|audio_end|>
    // thinker_config.position_id_per_seconds: temporal positions per second of video (and the
    // audio token rate the interleave of audio-in-video compares against).
    double position_id_per_seconds = 13.0;
    // vision_config.spatial_merge_size: patches merged into one token along h and along w.
    std::int64_t spatial_merge_size = 2;
};

// Longest prompt (after expansion) and largest position accepted. Positions are float32, as
// transformers computes them, and float32 holds every integer below 2^24 exactly.
inline constexpr std::int64_t kMaxPromptTokens = std::int64_t{1} << 24;
// Per-axis bound of a grid (patch units) and of an audio's mel frames; far above any real input,
// low enough that no product overflows.
inline constexpr std::int64_t kMaxGridSide = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxMelFrames = std::int64_t{1} << 30;
inline constexpr double kMaxSecondsPerGrid = 3600.0;

struct VideoItem {
    GridThw grid;
    // video_second_per_grid: seconds one temporal grid spans (temporal_patch_size / fps).
    double second_per_grid = 2.0;
    // use_audio_in_video: the mel frame count of the video's own soundtrack. Set, the video's
    // placeholder becomes the interleave of video and audio tokens (placeholders.h).
    std::optional<std::int64_t> audio_mel_frames;
};

// The media of one prompt, each list in prompt order. `audio_mel_frames` holds the standalone
// audio items only; a video's soundtrack lives in its VideoItem. (transformers keeps one audio
// list in which a use_audio_in_video video's soundtrack takes its place in prompt order.)
struct MediaItems {
    std::vector<GridThw> images;
    std::vector<VideoItem> videos;
    std::vector<std::int64_t> audio_mel_frames;
};

// The checks below fail with invalid_argument (malformed) or out_of_range (too large), naming
// `what` ("images[2]") in the message.

// Config sanity: distinct, non-negative special ids; merge size >= 1; positions per second
// finite and > 0.
[[nodiscard]] Status validate(const LayoutConfig& config);
// Tokens of an image or a video: t·h·w / merge². Each side in [1, kMaxGridSide], h and w
// divisible by the merge size, result at most kMaxPromptTokens.
[[nodiscard]] Result<std::int64_t> vision_token_count(const GridThw& grid,
                                                      const LayoutConfig& config,
                                                      std::string_view what);
// audio_output_length after checking mel_frames in [1, kMaxMelFrames].
[[nodiscard]] Result<std::int64_t> audio_token_count(std::int64_t mel_frames,
                                                     std::string_view what);
// second_per_grid finite and in (0, kMaxSecondsPerGrid], plus the grid and the soundtrack.
[[nodiscard]] Status validate(const VideoItem& video, const LayoutConfig& config,
                              std::string_view what);

}  // namespace omnirt::models::qwen3_omni

#pragma once
// Video input for Qwen3-Omni: demux + decode from memory (FFmpeg: mp4/mov, mkv, webm with
// H.264, VP8, VP9, AV1 and whatever else Debian's FFmpeg decodes), frame sampling as the
// reference pipelines do (qwen-vl-utils fetch_video), per-frame resize, patches with
// second_per_grid, and the audio track as 16 kHz mono for use_audio_in_video. Pure functions over
// memory; no temp files and no threads (FFmpeg decoders run single-threaded); safe to call
// concurrently. Seconds of CPU for long videos: call from a worker.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "media/image.h"
#include "media/vision.h"

namespace omnirt::media {

struct VideoOptions {
    // Limits, checked from the container before frames are decoded.
    double max_duration_seconds = 3600.0;
    std::int64_t max_total_frames = 216000;         // 1 h at 60 fps
    std::int64_t max_frame_pixels = 4096LL * 4096;  // decoded width * height
    // Frame sampling (qwen-vl-utils): target fps, frame count clamped to [min_frames,
    // min(max_frames, total)] and floored to a multiple of 2.
    double fps = 2.0;
    int min_frames = 4;
    int max_frames = 768;
    // Per-frame smart_resize (factor 32); the frame's max_pixels is also bounded by
    // max_total_pixels / frames * 2, as qwen-vl-utils bounds VIDEO_TOTAL_PIXELS.
    VisionResizeBounds frame_bounds = kVideoFrameBounds;
    std::int64_t max_total_pixels = 128000LL * 32 * 32 * 9 / 10;
    // Decode the first audio track to 16 kHz mono (use_audio_in_video), up to this many
    // seconds (longer is out_of_range; the mel front end takes 20 minutes at most).
    bool decode_audio = true;
    double max_audio_seconds = 1200.0;
};

// Which frames to take from a video of total_frames at video_fps.
struct VideoSampling {
    std::vector<std::int64_t> indices;  // round(linspace(0, total - 1, n)), n even
    double sample_fps = 0.0;            // n / total * video_fps
};
// invalid_argument for fewer than 2 frames or a non-positive frame rate.
[[nodiscard]] Result<VideoSampling> sample_video_frames(std::int64_t total_frames, double video_fps,
                                                        const VideoOptions& options = {});

// The sampled frames, each resized as it is decoded (so that only small frames are held) to
// frame_size_for(), plus the stream facts.
struct DecodedVideo {
    std::vector<RgbImage> frames;  // all of one size, sides multiples of 32
    std::vector<std::int64_t> frame_indices;
    std::int64_t total_frames = 0;
    double video_fps = 0.0;
    double sample_fps = 0.0;
    bool has_audio = false;
    std::vector<float> audio_16k_mono;  // empty without an audio track or decode_audio
};

// The per-frame size for n sampled frames of width x height: smart_resize with
// options.frame_bounds, max_pixels further bounded by max_total_pixels / n * 2 (and never below
// 1.05 * min_pixels), as qwen-vl-utils bounds a video's total pixels.
[[nodiscard]] Result<ResizedSize> frame_size_for(int height, int width, std::int64_t frames,
                                                 const VideoOptions& options = {});

// Errors: invalid_argument for empty, unrecognised, corrupt or truncated data, no video stream,
// an undecodable codec, or fewer than 2 frames; out_of_range past max_duration_seconds or
// max_total_frames; resource_exhausted past max_frame_pixels.
[[nodiscard]] Result<DecodedVideo> decode_video(std::span<const std::byte> bytes,
                                                const VideoOptions& options = {});

struct VideoInput {
    VisionPatches patches;  // pixel_values_videos rows and video_grid_thw
    std::vector<std::int64_t> frame_indices;
    std::int64_t total_frames = 0;
    double video_fps = 0.0;
    double sample_fps = 0.0;
    double second_per_grid = 0.0;  // temporal_patch_size / sample_fps
    bool has_audio = false;
    std::vector<float> audio_16k_mono;
};

// decode_video (frames resized with the Pillow-exact bicubic), then patched (frame count padded
// to even by repeating the last).
[[nodiscard]] Result<VideoInput> preprocess_video(std::span<const std::byte> bytes,
                                                  const VideoOptions& options = {});

}  // namespace omnirt::media

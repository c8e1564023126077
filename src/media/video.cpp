// Frame sampling and the video -> patches step.
#include "media/video.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace omnirt::media {

Result<VideoSampling> sample_video_frames(std::int64_t total_frames, double video_fps,
                                          const VideoOptions& options) {
    constexpr std::int64_t kFrameFactor = kVisionTemporalPatchSize;
    if (total_frames < kFrameFactor) {
        return fail(ErrorCode::invalid_argument, "video has " + std::to_string(total_frames) +
                                                     " frame(s); at least 2 are needed");
    }
    if (!(video_fps > 0.0) || !std::isfinite(video_fps)) {
        return fail(ErrorCode::invalid_argument, "video has no usable frame rate");
    }
    if (!(options.fps > 0.0) || options.min_frames < 1 || options.max_frames < 1) {
        return fail(ErrorCode::invalid_argument,
                    "video sampling needs fps > 0 and positive min/max frames");
    }
    auto floor_by = [](double x, std::int64_t f) { return std::floor(x / f) * f; };
    auto ceil_by = [](double x, std::int64_t f) { return std::ceil(x / f) * f; };
    const double total = static_cast<double>(total_frames);
    const double min_frames = ceil_by(options.min_frames, kFrameFactor);
    const double max_frames = floor_by(std::min<double>(options.max_frames, total), kFrameFactor);
    double n = total / video_fps * options.fps;
    n = std::min(std::min(std::max(n, min_frames), max_frames), total);
    n = floor_by(n, kFrameFactor);
    if (n < kFrameFactor || n > total) {
        return fail(ErrorCode::invalid_argument,
                    "cannot sample an even number of frames from " + std::to_string(total_frames));
    }
    const auto count = static_cast<std::int64_t>(n);
    VideoSampling out;
    out.indices.resize(static_cast<std::size_t>(count));
    // torch.linspace(0, total - 1, n) in float32 (each half computed from its own end), then
    // round half to even.
    const float start = 0.0f;
    const auto end = static_cast<float>(total_frames - 1);
    const float step = (end - start) / static_cast<float>(count - 1);
    const std::int64_t halfway = count / 2;
    for (std::int64_t i = 0; i < count; ++i) {
        const float value = i < halfway ? start + step * static_cast<float>(i)
                                        : end - step * static_cast<float>(count - i - 1);
        out.indices[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(std::nearbyint(value));
    }
    out.sample_fps = n / std::max(total, 1e-6) * video_fps;
    return out;
}

Result<ResizedSize> frame_size_for(int height, int width, std::int64_t frames,
                                   const VideoOptions& options) {
    if (frames < 1) return fail(ErrorCode::invalid_argument, "frame_size_for: no frames");
    VisionResizeBounds bounds = options.frame_bounds;
    bounds.max_pixels = std::max<std::int64_t>(
        std::min<std::int64_t>(bounds.max_pixels,
                               options.max_total_pixels / frames * kVisionTemporalPatchSize),
        static_cast<std::int64_t>(static_cast<double>(bounds.min_pixels) * 1.05));
    return smart_resize(height, width, bounds);
}

Result<VideoInput> preprocess_video(std::span<const std::byte> bytes, const VideoOptions& options) {
    OMNI_TRY(DecodedVideo video, decode_video(bytes, options));
    OMNI_TRY(VisionPatches patches, patchify_frames(video.frames));
    VideoInput out;
    out.patches = std::move(patches);
    out.frame_indices = std::move(video.frame_indices);
    out.total_frames = video.total_frames;
    out.video_fps = video.video_fps;
    out.sample_fps = video.sample_fps;
    out.second_per_grid = kVisionTemporalPatchSize / video.sample_fps;
    out.has_audio = video.has_audio;
    out.audio_16k_mono = std::move(video.audio_16k_mono);
    return out;
}

}  // namespace omnirt::media

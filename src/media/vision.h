#pragma once
// Qwen2-VL / Qwen3-Omni vision preprocessing: smart_resize, rescale + normalise to [-1, 1] and
// the patch layout the vision tower reads (fact sheet qwen3-omni.md §3.2 and §3.5). Pure
// functions; safe to call concurrently.
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "media/image.h"

namespace omnirt::media {

inline constexpr int kVisionPatchSize = 16;
inline constexpr int kVisionTemporalPatchSize = 2;
inline constexpr int kVisionMergeSize = 2;
// 3 channels x 2 frames x 16 x 16.
inline constexpr int kVisionPatchDim =
    3 * kVisionTemporalPatchSize * kVisionPatchSize * kVisionPatchSize;

// Bounds of smart_resize: both sides become multiples of `factor` and the area lands in
// [min_pixels, max_pixels] (approximately: the aspect ratio is kept as well as the grid allows).
struct VisionResizeBounds {
    int factor = kVisionPatchSize * kVisionMergeSize;  // 32
    std::int64_t min_pixels = 3136;                    // 56 * 56
    std::int64_t max_pixels = 12845056;                // 28 * 28 * 16384
};
// The per-frame bounds of the HF video processor defaults (size.shortest_edge / longest_edge).
inline constexpr VisionResizeBounds kVideoFrameBounds{
    .factor = 32, .min_pixels = 128 * 32 * 32, .max_pixels = 768 * 32 * 32};

struct ResizedSize {
    int height = 0;
    int width = 0;
};

// transformers' smart_resize (Python round() is half-to-even and is reproduced). invalid_argument
// for a side below 1, an aspect ratio over 200 or bounds that make no sense.
[[nodiscard]] Result<ResizedSize> smart_resize(int height, int width,
                                               const VisionResizeBounds& bounds = {});

// What the vision tower takes for one image or video: pixel_values [rows, 1536] and its grid
// (t, h, w) in patch units. Row order: per temporal group, 2x2 merge blocks row-major and the
// four patches of a block row-major; inside a row, (channel, frame, y, x).
struct VisionPatches {
    std::vector<float> pixels;  // rows * kVisionPatchDim
    std::int64_t rows = 0;
    std::int64_t grid_t = 0;
    std::int64_t grid_h = 0;
    std::int64_t grid_w = 0;

    // Tokens the LLM sees after the 2x2 merge: t * h * w / 4.
    [[nodiscard]] std::int64_t llm_tokens() const { return grid_t * grid_h * grid_w / 4; }
};

// The pixel value the model sees for an 8-bit sample: float32(v * (1/255)) then (x - 0.5) / 0.5,
// in float32 as the HF processor computes it.
[[nodiscard]] float normalize_sample(std::uint8_t value);

// Patches from frames already resized to one common size whose sides are multiples of 32. An odd
// frame count is padded by repeating the last frame; one frame becomes two (an image).
// invalid_argument for no frames, mismatched sizes or sides not multiples of 32.
[[nodiscard]] Result<VisionPatches> patchify_frames(std::span<const RgbImage> frames);

// An image as Qwen3-Omni's image processor prepares it: smart_resize (factor 32, 3136 ..
// 12845056 pixels by default), Pillow bicubic resize, normalise, repeat to two frames, patchify.
[[nodiscard]] Result<VisionPatches> preprocess_image(const RgbImage& image,
                                                     const VisionResizeBounds& bounds = {});

}  // namespace omnirt::media

// smart_resize, normalisation and the Qwen2-VL patch layout.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "media/vision.h"

namespace omnirt::media {
namespace {

constexpr double kMaxAspectRatio = 200.0;

std::string size_text(std::int64_t height, std::int64_t width) {
    return std::to_string(width) + " x " + std::to_string(height);
}

const std::array<float, 256>& normalize_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> values{};
        for (int v = 0; v < 256; ++v) {
            // rescale in float64 then cast (numpy's astype), normalise in float32.
            const auto rescaled = static_cast<float>(static_cast<double>(v) * (1.0 / 255.0));
            values[v] = (rescaled - 0.5f) / 0.5f;
        }
        return values;
    }();
    return table;
}

// pixel_values runs to tens of MiB (47 MiB for a 1080p image) and is written once: most of the
// time of filling it goes to first-touch page faults. Asking for transparent huge pages on the
// fresh allocation (where the kernel has them in madvise mode) makes that 512 times fewer faults.
void reserve_large(std::vector<float>& values, std::size_t count) {
    values.reserve(count);
#if defined(__linux__)
    constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
    const auto begin = reinterpret_cast<std::uintptr_t>(values.data());
    const std::uintptr_t end = begin + count * sizeof(float);
    const std::uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
    if (end > aligned + kHugePage) {
        (void)madvise(reinterpret_cast<void*>(aligned), (end - aligned) & ~(kHugePage - 1),
                      MADV_HUGEPAGE);
    }
#endif
}

}  // namespace

float normalize_sample(std::uint8_t value) { return normalize_table()[value]; }

Result<ResizedSize> smart_resize(int height, int width, const VisionResizeBounds& bounds) {
    if (height < 1 || width < 1) {
        return fail(ErrorCode::invalid_argument,
                    "smart_resize: image size " + size_text(height, width) + " is empty");
    }
    if (bounds.factor < 1 || bounds.min_pixels < 1 || bounds.max_pixels < bounds.min_pixels) {
        return fail(ErrorCode::invalid_argument,
                    "smart_resize: factor must be positive and 1 <= min_pixels <= max_pixels");
    }
    const double h = height;
    const double w = width;
    if (std::max(h, w) / std::min(h, w) > kMaxAspectRatio) {
        return fail(ErrorCode::invalid_argument,
                    "image aspect ratio of " + size_text(height, width) +
                        " is over 200:1, which the vision encoder does not accept");
    }
    const double factor = bounds.factor;
    // Python's round(): half to even, which nearbyint gives in the default rounding mode.
    double h_bar = std::nearbyint(h / factor) * factor;
    double w_bar = std::nearbyint(w / factor) * factor;
    if (h_bar * w_bar > static_cast<double>(bounds.max_pixels)) {
        const double beta = std::sqrt(h * w / static_cast<double>(bounds.max_pixels));
        h_bar = std::max(factor, std::floor(h / beta / factor) * factor);
        w_bar = std::max(factor, std::floor(w / beta / factor) * factor);
    } else if (h_bar * w_bar < static_cast<double>(bounds.min_pixels)) {
        const double beta = std::sqrt(static_cast<double>(bounds.min_pixels) / (h * w));
        h_bar = std::ceil(h * beta / factor) * factor;
        w_bar = std::ceil(w * beta / factor) * factor;
    }
    return ResizedSize{.height = static_cast<int>(h_bar), .width = static_cast<int>(w_bar)};
}

Result<VisionPatches> patchify_frames(std::span<const RgbImage> frames) {
    constexpr int kBlock = kVisionPatchSize * kVisionMergeSize;
    if (frames.empty()) return fail(ErrorCode::invalid_argument, "patchify: no frames");
    const int height = frames.front().height;
    const int width = frames.front().width;
    if (height <= 0 || width <= 0 || height % kBlock != 0 || width % kBlock != 0) {
        return fail(ErrorCode::invalid_argument, "patchify: frame size " +
                                                     size_text(height, width) +
                                                     " is not a positive multiple of 32");
    }
    for (const RgbImage& frame : frames) {
        if (frame.height != height || frame.width != width ||
            frame.pixels.size() != static_cast<std::size_t>(height) * width * 3) {
            return fail(ErrorCode::invalid_argument,
                        "patchify: every frame must be " + size_text(height, width) + " RGB");
        }
    }
    const auto padded_frames =
        static_cast<std::int64_t>((frames.size() + kVisionTemporalPatchSize - 1) /
                                  kVisionTemporalPatchSize * kVisionTemporalPatchSize);
    VisionPatches out;
    out.grid_t = padded_frames / kVisionTemporalPatchSize;
    out.grid_h = height / kVisionPatchSize;
    out.grid_w = width / kVisionPatchSize;
    out.rows = out.grid_t * out.grid_h * out.grid_w;
    reserve_large(out.pixels, static_cast<std::size_t>(out.rows) * kVisionPatchDim);
    out.pixels.resize(static_cast<std::size_t>(out.rows) * kVisionPatchDim);
    const std::array<float, 256>& table = normalize_table();
    auto frame_at = [&](std::int64_t index) -> const RgbImage& {
        return frames[static_cast<std::size_t>(
            std::min<std::int64_t>(index, static_cast<std::int64_t>(frames.size()) - 1))];
    };
    float* dst = out.pixels.data();
    for (std::int64_t t = 0; t < out.grid_t; ++t) {
        const RgbImage* pair[kVisionTemporalPatchSize] = {&frame_at(t * 2), &frame_at(t * 2 + 1)};
        for (std::int64_t block_row = 0; block_row < out.grid_h / kVisionMergeSize; ++block_row) {
            for (std::int64_t block_col = 0; block_col < out.grid_w / kVisionMergeSize;
                 ++block_col) {
                for (int sub_row = 0; sub_row < kVisionMergeSize; ++sub_row) {
                    for (int sub_col = 0; sub_col < kVisionMergeSize; ++sub_col) {
                        const std::int64_t y0 =
                            (block_row * kVisionMergeSize + sub_row) * kVisionPatchSize;
                        const std::int64_t x0 =
                            (block_col * kVisionMergeSize + sub_col) * kVisionPatchSize;
                        for (int c = 0; c < 3; ++c) {
                            for (const RgbImage* frame : pair) {
                                for (int y = 0; y < kVisionPatchSize; ++y) {
                                    const std::uint8_t* src =
                                        frame->pixels.data() + ((y0 + y) * width + x0) * 3 + c;
                                    for (int x = 0; x < kVisionPatchSize; ++x) {
                                        *dst++ = table[src[x * 3]];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    return out;
}

Result<VisionPatches> preprocess_image(const RgbImage& image, const VisionResizeBounds& bounds) {
    OMNI_TRY(const ResizedSize size, smart_resize(image.height, image.width, bounds));
    OMNI_TRY(RgbImage resized, resize_bicubic(image, size.width, size.height));
    return patchify_frames(std::span<const RgbImage>(&resized, 1));
}

}  // namespace omnirt::media

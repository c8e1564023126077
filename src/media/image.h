#pragma once
// Still images for the vision front end: decode (JPEG, PNG, WebP, BMP, GIF) to 8-bit RGB, and
// Pillow-exact bicubic resizing. Pure functions over memory: no temp files, no threads of their
// own; safe to call concurrently. CPU work: call from a worker, not an IO loop thread.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace omnirt::media {

// Packed 8-bit RGB, row-major, no padding: pixels[(y * width + x) * 3 + channel].
struct RgbImage {
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> pixels;
};

enum class ImageFormat : std::uint8_t { jpeg, png, webp, bmp, gif };
[[nodiscard]] std::string_view to_string(ImageFormat format);

// Limits checked against the file's header before any pixel buffer is allocated.
struct ImageLimits {
    // Most decoded pixels (width * height); 8192 x 8192 by default (192 MiB of RGB).
    std::int64_t max_pixels = std::int64_t{8192} * 8192;
    // Largest max(w, h) / min(w, h); Qwen2-VL's smart_resize rejects more than 200.
    double max_aspect_ratio = 200.0;
};

// The format named by the first bytes (magic numbers), or invalid_argument naming the formats
// accepted.
[[nodiscard]] Result<ImageFormat> detect_image_format(std::span<const std::byte> bytes);

// Decodes to RGB as Pillow's Image.open(...).convert("RGB") does: grayscale is replicated,
// palettes are expanded, alpha is dropped (not composited), 16-bit samples keep their high byte,
// GIF gives its first frame, JPEG is decoded by libjpeg-turbo as Pillow does (same IDCT and
// upsampling, so the same bytes). Errors: invalid_argument for empty, unrecognised, corrupt or
// truncated data (the decoder's message included), for a zero-sized image and for an aspect
// ratio over the limit; resource_exhausted when the header declares more pixels than
// limits.max_pixels.
[[nodiscard]] Result<RgbImage> decode_image(std::span<const std::byte> bytes,
                                            const ImageLimits& limits = {});

// Image.resize((width, height), Image.BICUBIC) of Pillow on an RGB image, bit for bit: separable
// (horizontal pass first, rounded and clipped to 8 bits, then vertical), cubic kernel a = -0.5
// whose support widens by the downscale factor, coefficients normalised and held as 22-bit fixed
// point. Same size returns a copy. invalid_argument for an empty or malformed image or a target
// size below 1.
[[nodiscard]] Result<RgbImage> resize_bicubic(const RgbImage& image, int width, int height);

}  // namespace omnirt::media

#pragma once
// Private to omnirt_media: the per-format image decoders behind decode_image.
#include <cstddef>
#include <span>

#include "media/image.h"

namespace omnirt::media::detail {

// invalid_argument for a zero side or an aspect ratio over limits.max_aspect_ratio;
// resource_exhausted past limits.max_pixels. Called with the header's size, before allocating.
[[nodiscard]] Status check_image_size(std::int64_t width, std::int64_t height,
                                      const ImageLimits& limits);

[[nodiscard]] Result<RgbImage> decode_jpeg(std::span<const std::byte> bytes,
                                           const ImageLimits& limits);
[[nodiscard]] Result<RgbImage> decode_png(std::span<const std::byte> bytes,
                                          const ImageLimits& limits);
[[nodiscard]] Result<RgbImage> decode_webp(std::span<const std::byte> bytes,
                                           const ImageLimits& limits);
// BMP and GIF (first frame) through FFmpeg's image decoders.
[[nodiscard]] Result<RgbImage> decode_with_ffmpeg(std::span<const std::byte> bytes,
                                                  ImageFormat format, const ImageLimits& limits);

}  // namespace omnirt::media::detail

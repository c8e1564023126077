// decode_image: format detection, the size limits, and dispatch to the per-format decoders.
#include <algorithm>
#include <string>

#include "media/image_internal.h"

namespace omnirt::media {

Status detail::check_image_size(std::int64_t width, std::int64_t height,
                                const ImageLimits& limits) {
    const std::string size = std::to_string(width) + " x " + std::to_string(height);
    if (width <= 0 || height <= 0) {
        return fail(ErrorCode::invalid_argument, "image size " + size + " is empty");
    }
    if (width > limits.max_pixels / height) {
        return fail(ErrorCode::resource_exhausted,
                    "image size " + size + " is more than the limit of " +
                        std::to_string(limits.max_pixels) + " pixels");
    }
    const double ratio =
        static_cast<double>(std::max(width, height)) / static_cast<double>(std::min(width, height));
    if (ratio > limits.max_aspect_ratio) {
        return fail(ErrorCode::invalid_argument,
                    "image size " + size + " has an aspect ratio over " +
                        std::to_string(static_cast<int>(limits.max_aspect_ratio)) + ":1");
    }
    return ok_status();
}

Result<RgbImage> decode_image(std::span<const std::byte> bytes, const ImageLimits& limits) {
    OMNI_TRY(const ImageFormat format, detect_image_format(bytes));
    Result<RgbImage> image = [&]() -> Result<RgbImage> {
        switch (format) {
            case ImageFormat::jpeg:
                return detail::decode_jpeg(bytes, limits);
            case ImageFormat::png:
                return detail::decode_png(bytes, limits);
            case ImageFormat::webp:
                return detail::decode_webp(bytes, limits);
            case ImageFormat::bmp:
            case ImageFormat::gif:
                return detail::decode_with_ffmpeg(bytes, format, limits);
        }
        return fail(ErrorCode::internal, "unknown image format");
    }();
    if (!image) {
        return fail(image.error().with_context("decoding " + std::string(to_string(format))));
    }
    return image;
}

}  // namespace omnirt::media

// WebP (lossy and lossless, still) through libwebp, as Pillow decodes it; alpha is dropped.
#include <webp/decode.h>

#include <string>

#include "media/image_internal.h"

namespace omnirt::media::detail {

Result<RgbImage> decode_webp(std::span<const std::byte> bytes, const ImageLimits& limits) {
    const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
    WebPBitstreamFeatures features{};
    const VP8StatusCode status = WebPGetFeatures(data, bytes.size(), &features);
    if (status != VP8_STATUS_OK) {
        return fail(ErrorCode::invalid_argument,
                    "corrupt or truncated WebP header (libwebp status " +
                        std::to_string(static_cast<int>(status)) + ")");
    }
    if (features.has_animation != 0) {
        return fail(ErrorCode::invalid_argument,
                    "animated WebP is not supported; send a still image or a video");
    }
    OMNI_RETURN_IF_ERROR(check_image_size(features.width, features.height, limits));
    RgbImage image{.width = features.width, .height = features.height, .pixels = {}};
    image.pixels.resize(static_cast<std::size_t>(image.width) * image.height * 3);
    if (WebPDecodeRGBInto(data, bytes.size(), image.pixels.data(), image.pixels.size(),
                          image.width * 3) == nullptr) {
        return fail(ErrorCode::invalid_argument, "corrupt or truncated WebP data");
    }
    return image;
}

}  // namespace omnirt::media::detail

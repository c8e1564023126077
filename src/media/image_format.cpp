// detect_image_format and format names.
#include <cstring>

#include "media/image.h"

namespace omnirt::media {

std::string_view to_string(ImageFormat format) {
    switch (format) {
        case ImageFormat::jpeg:
            return "jpeg";
        case ImageFormat::png:
            return "png";
        case ImageFormat::webp:
            return "webp";
        case ImageFormat::bmp:
            return "bmp";
        case ImageFormat::gif:
            return "gif";
    }
    return "unknown";
}

Result<ImageFormat> detect_image_format(std::span<const std::byte> bytes) {
    if (bytes.empty()) return fail(ErrorCode::invalid_argument, "image data is empty");
    auto starts_with = [&](std::size_t offset, const char* magic, std::size_t size) {
        return bytes.size() >= offset + size &&
               std::memcmp(bytes.data() + offset, magic, size) == 0;
    };
    if (starts_with(0, "\xFF\xD8\xFF", 3)) return ImageFormat::jpeg;
    if (starts_with(0, "\x89PNG\r\n\x1A\n", 8)) return ImageFormat::png;
    if (starts_with(0, "RIFF", 4) && starts_with(8, "WEBP", 4)) return ImageFormat::webp;
    if (starts_with(0, "GIF87a", 6) || starts_with(0, "GIF89a", 6)) return ImageFormat::gif;
    if (starts_with(0, "BM", 2) && bytes.size() >= 26) return ImageFormat::bmp;
    return fail(ErrorCode::invalid_argument,
                "image data is not a supported image (jpeg, png, webp, bmp or gif expected)");
}

}  // namespace omnirt::media

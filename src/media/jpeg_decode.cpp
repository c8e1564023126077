// JPEG through libjpeg-turbo, configured as Pillow configures it (default ISLOW IDCT, fancy
// upsampling, libjpeg's own YCbCr -> RGB), so that the decoded bytes are Pillow's.
#include <csetjmp>
#include <cstdio>
#include <string>
#include <vector>

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "media/image_internal.h"

namespace omnirt::media::detail {
namespace {

struct ErrorManager {
    jpeg_error_mgr base{};
    std::jmp_buf jump{};
    char message[JMSG_LENGTH_MAX] = {};
    bool truncated = false;
};

[[noreturn]] void on_error(j_common_ptr info) {
    auto* errors = reinterpret_cast<ErrorManager*>(info->err);
    errors->base.format_message(info, errors->message);
    std::longjmp(errors->jump, 1);
}

void on_message(j_common_ptr info, int level) {
    auto* errors = reinterpret_cast<ErrorManager*>(info->err);
    // Level -1 is a warning about corrupt data; a premature end means a truncated file, which
    // Pillow refuses as well (libjpeg would fill the rest with grey).
    if (level < 0 && errors->base.msg_code == JWRN_JPEG_EOF) errors->truncated = true;
}

}  // namespace

Result<RgbImage> decode_jpeg(std::span<const std::byte> bytes, const ImageLimits& limits) {
    jpeg_decompress_struct info{};
    ErrorManager errors;
    info.err = jpeg_std_error(&errors.base);
    errors.base.error_exit = on_error;
    errors.base.emit_message = on_message;
    RgbImage image;
    Status size_status = ok_status();
    std::vector<unsigned char> row;
    // No object with a destructor is created between setjmp and the calls that may longjmp.
    if (setjmp(errors.jump) != 0) {
        jpeg_destroy_decompress(&info);
        return fail(ErrorCode::invalid_argument,
                    std::string("corrupt or unsupported JPEG: ") + errors.message);
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()),
                 static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&info, TRUE);
    size_status = check_image_size(info.image_width, info.image_height, limits);
    if (!size_status) {
        jpeg_destroy_decompress(&info);
        return fail(size_status.error());
    }
    const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
    info.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&info);
    const int channels = info.output_components;
    image.width = static_cast<int>(info.output_width);
    image.height = static_cast<int>(info.output_height);
    image.pixels.resize(static_cast<std::size_t>(image.width) * image.height * 3);
    row.resize(static_cast<std::size_t>(image.width) * channels);
    while (info.output_scanline < info.output_height) {
        unsigned char* row_pointer = row.data();
        const auto y = info.output_scanline;
        if (jpeg_read_scanlines(&info, &row_pointer, 1) != 1) break;
        std::uint8_t* dst = image.pixels.data() + static_cast<std::size_t>(y) * image.width * 3;
        if (!cmyk) {
            std::copy(row.begin(), row.end(), dst);
            continue;
        }
        // Adobe CMYK JPEGs store inverted ink; Pillow's CMYK -> RGB is then (ink_c * ink_k) / 255
        // on the stored values.
        for (int x = 0; x < image.width; ++x) {
            const int k = row[x * 4 + 3];
            for (int c = 0; c < 3; ++c) {
                const int v = row[x * 4 + c] * k;
                dst[x * 3 + c] = static_cast<std::uint8_t>((v + 127) / 255);
            }
        }
    }
    jpeg_finish_decompress(&info);
    const bool truncated = errors.truncated;
    jpeg_destroy_decompress(&info);
    if (truncated) {
        return fail(ErrorCode::invalid_argument, "JPEG data is truncated (premature end of file)");
    }
    return image;
}

}  // namespace omnirt::media::detail

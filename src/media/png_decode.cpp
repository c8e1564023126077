// PNG through libpng's classic API, transformed to what Pillow's convert("RGB") gives: palette
// and low bit depths expanded, grey replicated, 16-bit samples cut to their high byte, alpha
// (and tRNS) dropped without compositing.
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "media/image_internal.h"

namespace omnirt::media::detail {
namespace {

struct Reader {
    std::span<const std::byte> bytes;
    std::size_t position = 0;
    char message[256] = {};
};

void read_bytes(png_structp png, png_bytep out, png_size_t size) {
    auto* reader = static_cast<Reader*>(png_get_io_ptr(png));
    if (reader->bytes.size() - reader->position < size) {
        png_error(png, "unexpected end of data (truncated file)");
    }
    std::memcpy(out, reader->bytes.data() + reader->position, size);
    reader->position += size;
}

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
    auto* reader = static_cast<Reader*>(png_get_error_ptr(png));
    std::strncpy(reader->message, message, sizeof(reader->message) - 1);
    png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

}  // namespace

Result<RgbImage> decode_png(std::span<const std::byte> bytes, const ImageLimits& limits) {
    Reader reader{.bytes = bytes, .position = 0, .message = {}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_error, on_warning);
    if (png == nullptr) return fail(ErrorCode::internal, "libpng could not start");
    png_infop info = png_create_info_struct(png);
    RgbImage image;
    std::vector<png_bytep> rows;
    Status size_status = ok_status();
    // Nothing with a destructor is created between setjmp and the libpng calls that longjmp.
    if (setjmp(png_jmpbuf(png)) != 0) {
        png_destroy_read_struct(&png, &info, nullptr);
        return fail(ErrorCode::invalid_argument,
                    std::string("corrupt or unsupported PNG: ") + reader.message);
    }
    if (info == nullptr) png_error(png, "out of memory");
    png_set_read_fn(png, &reader, read_bytes);
    png_read_info(png, info);
    size_status =
        check_image_size(png_get_image_width(png, info), png_get_image_height(png, info), limits);
    if (!size_status) {
        png_destroy_read_struct(&png, &info, nullptr);
        return fail(size_status.error());
    }
    png_set_expand(png);    // palette -> RGB, grey < 8 bits -> 8 bits, tRNS -> alpha
    png_set_strip_16(png);  // high byte, as Pillow's 16-bit unpackers
    png_set_strip_alpha(png);
    png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8) {
        png_error(png, "unexpected pixel layout after conversion");
    }
    image.width = static_cast<int>(png_get_image_width(png, info));
    image.height = static_cast<int>(png_get_image_height(png, info));
    image.pixels.resize(static_cast<std::size_t>(image.width) * image.height * 3);
    rows.resize(static_cast<std::size_t>(image.height));
    for (int y = 0; y < image.height; ++y) {
        rows[y] = image.pixels.data() + static_cast<std::size_t>(y) * image.width * 3;
    }
    png_read_image(png, rows.data());
    png_read_end(png, nullptr);
    png_destroy_read_struct(&png, &info, nullptr);
    return image;
}

}  // namespace omnirt::media::detail

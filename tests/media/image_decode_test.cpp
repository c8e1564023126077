// decode_image against Pillow's decoding (tests/media/goldens/generate_decode.py) and on
// hostile inputs.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

using namespace std::string_literals;

#include "media/golden_file.h"
#include "media/image.h"

namespace omnirt::media {
namespace {

struct Case {
    std::string encoded;
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> rgb;
};

const std::map<std::string, Case>& cases() {
    static const std::map<std::string, Case> all = [] {
        std::map<std::string, Case> out;
        testing::GoldenReader reader(
            testing::read_file_bytes(testing::golden_path("decode_golden.bin")));
        OMNI_CHECK(reader.text(8) == "OMNIDEC1", "malformed decode_golden.bin");
        const std::uint32_t count = reader.u32();
        for (std::uint32_t i = 0; i < count; ++i) {
            const std::string name = reader.text(reader.u32());
            Case c;
            c.encoded = reader.text(reader.u32());
            c.width = static_cast<int>(reader.u32());
            c.height = static_cast<int>(reader.u32());
            c.rgb = reader.array<std::uint8_t>(static_cast<std::size_t>(c.width) * c.height * 3);
            out[name] = std::move(c);
        }
        OMNI_CHECK(reader.ok() && reader.at_end(), "truncated decode_golden.bin");
        return out;
    }();
    return all;
}

std::span<const std::byte> bytes_of(const std::string& data) {
    return std::as_bytes(std::span<const char>(data.data(), data.size()));
}

TEST(DecodeImage, MatchesPillowConvertRgb) {
    ASSERT_GE(cases().size(), 12u);
    for (const auto& [name, c] : cases()) {
        if (name == "png_201x1") continue;
        auto image = decode_image(bytes_of(c.encoded));
        ASSERT_TRUE(image.has_value()) << name << ": " << image.error().to_string();
        EXPECT_EQ(image->width, c.width) << name;
        EXPECT_EQ(image->height, c.height) << name;
        ASSERT_EQ(image->pixels.size(), c.rgb.size()) << name;
        std::size_t mismatches = 0;
        int worst = 0;
        for (std::size_t i = 0; i < c.rgb.size(); ++i) {
            const int diff = std::abs(int{image->pixels[i]} - int{c.rgb[i]});
            mismatches += diff != 0;
            worst = std::max(worst, diff);
        }
        if (name == "gif_transparent") {
            // FFmpeg paints transparent GIF pixels with its trans_color; Pillow gives the
            // palette entry of the transparent index. Only those pixels may differ.
            EXPECT_LT(mismatches, c.rgb.size() / 10) << name;
            continue;
        }
        EXPECT_EQ(mismatches, 0u) << name << ": worst difference " << worst;
    }
}

TEST(DecodeImage, DetectsFormats) {
    EXPECT_EQ(*detect_image_format(bytes_of(cases().at("jpeg_420").encoded)), ImageFormat::jpeg);
    EXPECT_EQ(*detect_image_format(bytes_of(cases().at("png_rgb").encoded)), ImageFormat::png);
    EXPECT_EQ(*detect_image_format(bytes_of(cases().at("webp_lossy").encoded)), ImageFormat::webp);
    EXPECT_EQ(*detect_image_format(bytes_of(cases().at("bmp_rgb").encoded)), ImageFormat::bmp);
    EXPECT_EQ(*detect_image_format(bytes_of(cases().at("gif").encoded)), ImageFormat::gif);
}

TEST(DecodeImage, AspectRatioOver200IsRejected) {
    auto wide = decode_image(bytes_of(cases().at("png_201x1").encoded));
    ASSERT_FALSE(wide.has_value());
    EXPECT_EQ(wide.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(wide.error().message.find("aspect ratio"), std::string::npos) << wide.error().message;
    EXPECT_TRUE(decode_image(bytes_of(cases().at("png_200x1").encoded)).has_value());
}

TEST(DecodeImage, EmptyGarbageAndWrongFormatFailClearly) {
    auto empty = decode_image({});
    ASSERT_FALSE(empty.has_value());
    EXPECT_EQ(empty.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(empty.error().message.find("empty"), std::string::npos);

    std::mt19937 random(5);
    for (std::size_t size : {1u, 2u, 7u, 64u, 5000u}) {
        std::string garbage(size, '\0');
        for (char& c : garbage) c = static_cast<char>(random());
        auto decoded = decode_image(bytes_of(garbage));
        ASSERT_FALSE(decoded.has_value());
        EXPECT_EQ(decoded.error().code, ErrorCode::invalid_argument);
    }
    const std::string wav = "RIFF\x24\0\0\0WAVEfmt "s;
    auto audio = decode_image(bytes_of(wav));
    ASSERT_FALSE(audio.has_value());
    EXPECT_NE(audio.error().message.find("jpeg, png, webp, bmp or gif"), std::string::npos);
}

TEST(DecodeImage, TruncatedAndCorruptFilesNeverCrash) {
    for (const auto& [name, c] : cases()) {
        for (std::size_t keep : {c.encoded.size() / 8, c.encoded.size() / 3, c.encoded.size() / 2,
                                 c.encoded.size() - 1}) {
            const std::string cut = c.encoded.substr(0, keep);
            auto decoded = decode_image(bytes_of(cut));
            // Some formats (BMP, GIF) decode a prefix; the others must say what went wrong.
            if (!decoded.has_value()) {
                EXPECT_EQ(decoded.error().code, ErrorCode::invalid_argument) << name;
                EXPECT_FALSE(decoded.error().message.empty());
            }
        }
        std::mt19937 random(11);
        for (int round = 0; round < 20; ++round) {
            std::string corrupt = c.encoded;
            for (int flips = 0; flips < 8; ++flips) {
                corrupt[random() % corrupt.size()] = static_cast<char>(random());
            }
            (void)decode_image(bytes_of(corrupt));  // any result but a crash
        }
    }
    for (const char* name : {"jpeg_420", "png_rgb", "webp_lossy"}) {
        const std::string& whole = cases().at(name).encoded;
        auto decoded = decode_image(bytes_of(whole.substr(0, whole.size() / 2)));
        EXPECT_FALSE(decoded.has_value()) << name << " truncated by half decoded";
    }
}

std::uint32_t crc32(const std::string& data, std::size_t begin, std::size_t end) {
    std::uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = begin; i < end; ++i) {
        crc ^= static_cast<std::uint8_t>(data[i]);
        for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

void put_be32(std::string& data, std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) data[at + i] = static_cast<char>(v >> (24 - 8 * i));
}

TEST(DecodeImage, HugeDeclaredDimensionsAreRejectedBeforeDecoding) {
    // PNG: IHDR width / height at bytes 16 and 20, CRC over type + data at 29.
    std::string png = cases().at("png_rgb").encoded;
    put_be32(png, 16, 60000);
    put_be32(png, 20, 60000);
    put_be32(png, 29, crc32(png, 12, 29));
    auto huge_png = decode_image(bytes_of(png));
    ASSERT_FALSE(huge_png.has_value());
    EXPECT_EQ(huge_png.error().code, ErrorCode::resource_exhausted) << huge_png.error().message;
    EXPECT_NE(huge_png.error().message.find("60000 x 60000"), std::string::npos);

    // JPEG: the SOF0/SOF2 segment holds height then width (big-endian u16) after precision.
    std::string jpeg = cases().at("jpeg_420").encoded;
    for (std::size_t i = 2; i + 9 < jpeg.size(); ++i) {
        const auto marker = static_cast<std::uint8_t>(jpeg[i + 1]);
        if (static_cast<std::uint8_t>(jpeg[i]) == 0xFF && (marker == 0xC0 || marker == 0xC2)) {
            jpeg[i + 5] = jpeg[i + 7] = '\x75';  // 30000 x 30000
            jpeg[i + 6] = jpeg[i + 8] = '\x30';
            break;
        }
    }
    auto huge_jpeg = decode_image(bytes_of(jpeg));
    ASSERT_FALSE(huge_jpeg.has_value());
    EXPECT_EQ(huge_jpeg.error().code, ErrorCode::resource_exhausted) << huge_jpeg.error().message;

    // BMP: width and height as little-endian i32 at 18 and 22.
    std::string bmp = cases().at("bmp_rgb").encoded;
    for (int i = 0; i < 4; ++i) bmp[18 + i] = bmp[22 + i] = i == 3 ? '\x00' : '\x7F';
    auto huge_bmp = decode_image(bytes_of(bmp));
    ASSERT_FALSE(huge_bmp.has_value());

    // A limit below the real size.
    auto limited = decode_image(bytes_of(cases().at("webp_lossy").encoded), {.max_pixels = 100});
    ASSERT_FALSE(limited.has_value());
    EXPECT_EQ(limited.error().code, ErrorCode::resource_exhausted);
}

}  // namespace
}  // namespace omnirt::media

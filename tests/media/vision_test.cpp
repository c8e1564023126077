// smart_resize, patch layout and the image preprocessing path on hand-checked cases.
#include "media/vision.h"

#include <gtest/gtest.h>

#include "media/test_image.h"

namespace omnirt::media {
namespace {

TEST(NormalizeSample, MapsBytesToMinusOneOne) {
    EXPECT_EQ(normalize_sample(0), -1.0f);
    EXPECT_EQ(normalize_sample(255), 1.0f);
    EXPECT_NEAR(normalize_sample(128), 0.00392f, 1e-4f);
}

TEST(SmartResize, RejectsBadInput) {
    EXPECT_FALSE(smart_resize(0, 10).has_value());
    EXPECT_FALSE(smart_resize(10, -1).has_value());
    auto ratio = smart_resize(1, 201);
    ASSERT_FALSE(ratio.has_value());
    EXPECT_EQ(ratio.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(ratio.error().message.find("200:1"), std::string::npos);
    EXPECT_TRUE(smart_resize(1, 200).has_value());
    EXPECT_FALSE(smart_resize(10, 10, {.factor = 0}).has_value());
    EXPECT_FALSE(
        smart_resize(10, 10, {.factor = 32, .min_pixels = 100, .max_pixels = 10}).has_value());
}

TEST(SmartResize, KeepsTokensWithinBounds) {
    auto hd = smart_resize(1080, 1920);
    ASSERT_TRUE(hd.has_value());
    EXPECT_EQ(hd->height, 1088);
    EXPECT_EQ(hd->width, 1920);
    auto huge = smart_resize(20000, 20000);
    ASSERT_TRUE(huge.has_value());
    EXPECT_LE(std::int64_t{huge->height} * huge->width, 12845056);
    EXPECT_EQ(huge->height % 32, 0);
}

// Each pixel's value encodes where it is, so the layout can be checked exactly.
TEST(PatchifyFrames, RowAndVectorOrderFollowTheMergeBlocks) {
    constexpr int kHeight = 64, kWidth = 96;
    std::vector<RgbImage> frames;
    for (int t = 0; t < 3; ++t) {  // odd: the last frame is repeated
        RgbImage frame{.width = kWidth, .height = kHeight, .pixels = {}};
        frame.pixels.resize(kWidth * kHeight * 3);
        for (int y = 0; y < kHeight; ++y) {
            for (int x = 0; x < kWidth; ++x) {
                for (int c = 0; c < 3; ++c) {
                    frame.pixels[(y * kWidth + x) * 3 + c] =
                        static_cast<std::uint8_t>((x + 3 * y + 50 * c + 70 * t) % 256);
                }
            }
        }
        frames.push_back(std::move(frame));
    }
    auto patches = patchify_frames(frames);
    ASSERT_TRUE(patches.has_value()) << patches.error().to_string();
    EXPECT_EQ(patches->grid_t, 2);
    EXPECT_EQ(patches->grid_h, 4);
    EXPECT_EQ(patches->grid_w, 6);
    ASSERT_EQ(patches->rows, 48);
    EXPECT_EQ(patches->llm_tokens(), 12);
    std::int64_t row = 0;
    for (int gt = 0; gt < 2; ++gt) {
        for (int bh = 0; bh < 2; ++bh) {
            for (int bw = 0; bw < 3; ++bw) {
                for (int mh = 0; mh < 2; ++mh) {
                    for (int mw = 0; mw < 2; ++mw, ++row) {
                        const float* v = patches->pixels.data() + row * kVisionPatchDim;
                        for (int c = 0; c < 3; ++c) {
                            for (int tt = 0; tt < 2; ++tt) {
                                const int frame = std::min(gt * 2 + tt, 2);
                                for (int y = 0; y < 16; ++y) {
                                    for (int x = 0; x < 16; ++x) {
                                        const int py = (bh * 2 + mh) * 16 + y;
                                        const int px = (bw * 2 + mw) * 16 + x;
                                        const auto expected = static_cast<std::uint8_t>(
                                            (px + 3 * py + 50 * c + 70 * frame) % 256);
                                        ASSERT_EQ(v[((c * 2 + tt) * 16 + y) * 16 + x],
                                                  normalize_sample(expected))
                                            << row << " " << c << " " << tt << " " << y << " " << x;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST(PatchifyFrames, RejectsBadFrames) {
    EXPECT_FALSE(patchify_frames({}).has_value());
    RgbImage odd{.width = 48, .height = 32, .pixels = std::vector<std::uint8_t>(48 * 32 * 3)};
    EXPECT_FALSE(patchify_frames(std::span<const RgbImage>(&odd, 1)).has_value());
    RgbImage a{.width = 32, .height = 32, .pixels = std::vector<std::uint8_t>(32 * 32 * 3)};
    RgbImage b{.width = 64, .height = 32, .pixels = std::vector<std::uint8_t>(64 * 32 * 3)};
    std::vector<RgbImage> mixed{a, b};
    EXPECT_FALSE(patchify_frames(mixed).has_value());
    RgbImage short_buffer{.width = 32, .height = 32, .pixels = std::vector<std::uint8_t>(10)};
    EXPECT_FALSE(patchify_frames(std::span<const RgbImage>(&short_buffer, 1)).has_value());
}

TEST(PreprocessImage, OneImageIsTwoIdenticalFrames) {
    const RgbImage image = testing::test_image(100, 75, 3);
    auto patches = preprocess_image(image);
    ASSERT_TRUE(patches.has_value()) << patches.error().to_string();
    EXPECT_EQ(patches->grid_t, 1);
    EXPECT_EQ(patches->grid_h, 4);  // 75 -> 64
    EXPECT_EQ(patches->grid_w, 6);  // 100 -> 96
    for (std::int64_t r = 0; r < patches->rows; ++r) {
        const float* v = patches->pixels.data() + r * kVisionPatchDim;
        for (int c = 0; c < 3; ++c) {
            for (int i = 0; i < 256; ++i) ASSERT_EQ(v[(c * 2) * 256 + i], v[(c * 2 + 1) * 256 + i]);
        }
    }
}

TEST(ResizeBicubic, EdgeCases) {
    const RgbImage image = testing::test_image(7, 5, 1);
    auto same = resize_bicubic(image, 7, 5);
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(same->pixels, image.pixels);
    auto dot = resize_bicubic(image, 1, 1);
    ASSERT_TRUE(dot.has_value());
    EXPECT_EQ(dot->pixels.size(), 3u);
    auto big = resize_bicubic(testing::test_image(1, 1, 9), 64, 48);
    ASSERT_TRUE(big.has_value());
    for (std::size_t i = 3; i < big->pixels.size(); ++i) {
        EXPECT_EQ(big->pixels[i], big->pixels[i % 3]);  // a constant image stays constant
    }
    EXPECT_FALSE(resize_bicubic(image, 0, 5).has_value());
    EXPECT_FALSE(resize_bicubic(RgbImage{}, 5, 5).has_value());
    RgbImage broken{.width = 4, .height = 4, .pixels = std::vector<std::uint8_t>(5)};
    EXPECT_FALSE(resize_bicubic(broken, 2, 2).has_value());
}

}  // namespace
}  // namespace omnirt::media

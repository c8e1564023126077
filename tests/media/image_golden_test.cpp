// Resize, smart_resize and patches against Pillow + numpy (tests/media/goldens/generate_image.py).
#include <gtest/gtest.h>

#include "media/golden_file.h"
#include "media/test_image.h"
#include "media/vision.h"

namespace omnirt::media {
namespace {

class ImageGolden : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_EQ(reader_.text(8), "OMNIIMG1") << "missing or malformed image_golden.bin";
    }
    void read_resize_cases() {
        const std::uint32_t cases = reader_.u32();
        for (std::uint32_t c = 0; c < cases; ++c) {
            const auto header = reader_.array<std::uint32_t>(5);
            const auto expected =
                reader_.array<std::uint8_t>(std::size_t{header[2]} * header[3] * 3);
            ASSERT_TRUE(reader_.ok());
            resize_cases_.push_back({header, expected});
        }
    }
    void read_patch_cases() {
        const std::uint32_t cases = reader_.u32();
        for (std::uint32_t c = 0; c < cases; ++c) {
            const auto header = reader_.array<std::uint32_t>(6);
            const std::size_t rows = std::size_t{header[3]} * header[4] * header[5];
            const auto expected = reader_.array<float>(rows * kVisionPatchDim);
            ASSERT_TRUE(reader_.ok());
            patch_cases_.push_back({header, expected});
        }
    }

    testing::GoldenReader reader_{
        testing::read_file_bytes(testing::golden_path("image_golden.bin"))};
    std::vector<std::pair<std::vector<std::uint32_t>, std::vector<std::uint8_t>>> resize_cases_;
    std::vector<std::pair<std::vector<std::uint32_t>, std::vector<float>>> patch_cases_;
};

TEST_F(ImageGolden, BicubicResizeIsBitExactWithPillow) {
    read_resize_cases();
    ASSERT_GE(resize_cases_.size(), 6u);
    for (const auto& [h, expected] : resize_cases_) {
        const RgbImage source =
            testing::test_image(static_cast<int>(h[0]), static_cast<int>(h[1]), h[4]);
        auto resized = resize_bicubic(source, static_cast<int>(h[2]), static_cast<int>(h[3]));
        ASSERT_TRUE(resized.has_value()) << resized.error().to_string();
        ASSERT_EQ(resized->pixels.size(), expected.size());
        std::size_t mismatches = 0;
        int worst = 0;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            const int diff = std::abs(int{resized->pixels[i]} - int{expected[i]});
            mismatches += diff != 0;
            worst = std::max(worst, diff);
        }
        EXPECT_EQ(mismatches, 0u) << h[0] << "x" << h[1] << " -> " << h[2] << "x" << h[3]
                                  << ": worst difference " << worst;
    }
}

TEST_F(ImageGolden, PatchesMatchTheHfProcessor) {
    read_resize_cases();
    read_patch_cases();
    ASSERT_FALSE(patch_cases_.empty());
    for (const auto& [h, expected] : patch_cases_) {
        const RgbImage source =
            testing::test_image(static_cast<int>(h[0]), static_cast<int>(h[1]), h[2]);
        auto patches = preprocess_image(source);
        ASSERT_TRUE(patches.has_value()) << patches.error().to_string();
        EXPECT_EQ(patches->grid_t, h[3]);
        EXPECT_EQ(patches->grid_h, h[4]);
        EXPECT_EQ(patches->grid_w, h[5]);
        ASSERT_EQ(patches->pixels.size(), expected.size());
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            mismatches += patches->pixels[i] != expected[i];
        }
        EXPECT_EQ(mismatches, 0u);
        EXPECT_EQ(patches->llm_tokens(), patches->rows / 4);
    }
}

TEST_F(ImageGolden, SmartResizeMatchesTransformers) {
    read_resize_cases();
    read_patch_cases();
    const std::uint32_t cases = reader_.u32();
    ASSERT_GE(cases, 10u);
    for (std::uint32_t c = 0; c < cases; ++c) {
        const auto v = reader_.array<std::uint32_t>(7);
        ASSERT_TRUE(reader_.ok());
        const VisionResizeBounds bounds{
            .factor = static_cast<int>(v[2]), .min_pixels = v[3], .max_pixels = v[4]};
        auto size = smart_resize(static_cast<int>(v[0]), static_cast<int>(v[1]), bounds);
        if (v[5] == 0) {
            ASSERT_FALSE(size.has_value()) << v[0] << "x" << v[1];
            EXPECT_NE(size.error().message.find("aspect ratio"), std::string::npos);
            continue;
        }
        ASSERT_TRUE(size.has_value()) << size.error().to_string();
        EXPECT_EQ(size->height, static_cast<int>(v[5])) << v[0] << "x" << v[1];
        EXPECT_EQ(size->width, static_cast<int>(v[6])) << v[0] << "x" << v[1];
    }
    EXPECT_TRUE(reader_.at_end());
}

}  // namespace
}  // namespace omnirt::media

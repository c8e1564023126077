// The Qwen3-Omni audio and vision encoders on the tiny checkpoint the transformers goldens were
// made from (tests/goldens/hf/README.md): the same mel features and pixel patches give
// transformers' audio tower output, and its vision tower's merged embeddings and DeepStack
// features, for an image, a video, and both in one batch.
#include "models/qwen3_omni/audio_encoder.h"
#include "models/qwen3_omni/encoder_config.h"
#include "models/qwen3_omni/vision_encoder.h"
#include "models_omni_golden/golden_support.h"

namespace omnirt::models::qwen3_omni {
namespace {

double max_diff(const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
}

TEST(OmniEncodersGoldenTest, AudioTowerMatchesTransformers) {
    auto golden = Golden::open();
    if (!golden) GTEST_SKIP() << "tests/goldens/hf/qwen3_omni_tiny.safetensors not generated";
    auto tiny = make_tiny();
    auto config = audio_encoder_config_of(tiny->checkpoint->config());
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    auto encoder = AudioEncoder::load(*config, lookup_of(*tiny->checkpoint));
    ASSERT_TRUE(encoder.has_value()) << encoder.error().to_string();
    const at::Tensor features = golden->get("inputs.audio_features");
    const at::Tensor lengths = golden->get("inputs.audio_lengths");
    std::vector<at::Tensor> mels;
    for (std::int64_t i = 0; i < lengths.size(0); ++i) {
        mels.push_back(features[i].slice(1, 0, lengths[i].item<std::int64_t>()));
    }
    auto output = (*encoder)->forward(mels);
    ASSERT_TRUE(output.has_value()) << output.error().to_string();
    const at::Tensor expected = golden->get("audio_tower.last_hidden_state");
    EXPECT_LT(max_diff(at::cat(*output), expected), 1e-4);
}

class OmniVisionGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OmniVisionGoldenTest, VisionTowerMatchesTransformers) {
    auto golden = Golden::open();
    if (!golden) GTEST_SKIP() << "tests/goldens/hf/qwen3_omni_tiny.safetensors not generated";
    auto tiny = make_tiny();
    auto config = vision_encoder_config_of(tiny->checkpoint->config());
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    auto encoder = VisionEncoder::load(*config, lookup_of(*tiny->checkpoint));
    ASSERT_TRUE(encoder.has_value()) << encoder.error().to_string();
    const std::string which = GetParam();
    std::vector<at::Tensor> pixels;
    std::vector<GridThw> grids;
    for (const char* item : {"image", "video"}) {
        if (which != "both" && which != item) continue;
        pixels.push_back(golden->get(std::string("inputs.") + item + "_pixels"));
        const at::Tensor grid = golden->get(std::string("inputs.") + item + "_grid")[0];
        grids.push_back({grid[0].item<std::int64_t>(), grid[1].item<std::int64_t>(),
                         grid[2].item<std::int64_t>()});
    }
    auto output = (*encoder)->forward(at::cat(pixels), grids);
    ASSERT_TRUE(output.has_value()) << output.error().to_string();
    std::vector<at::Tensor> embeddings;
    std::vector<std::vector<at::Tensor>> deepstack(3);
    for (const VisionItemOutput& item : *output) {
        embeddings.push_back(item.embeddings);
        ASSERT_EQ(item.deepstack.size(), 3u);
        for (int k = 0; k < 3; ++k) deepstack[k].push_back(item.deepstack[k]);
    }
    const std::string prefix = "visual_" + which + ".";
    EXPECT_LT(max_diff(at::cat(embeddings), golden->get(prefix + "pooler_output")), 1e-4);
    for (int k = 0; k < 3; ++k) {
        EXPECT_LT(max_diff(at::cat(deepstack[k]),
                           golden->get(prefix + "deepstack_features." + std::to_string(k))),
                  1e-4)
            << "deepstack " << k;
    }
}

INSTANTIATE_TEST_SUITE_P(ImageVideoBoth, OmniVisionGoldenTest,
                         ::testing::Values("image", "video", "both"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace omnirt::models::qwen3_omni

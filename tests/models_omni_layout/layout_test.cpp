// layout.h: the audio output length against values worked by hand from the three stride-2
// convolutions (13 tokens per 100 frames, ceil(ceil(ceil(r/2)/2)/2) for the r leftover), and the
// checks on items and config.
#include <gtest/gtest.h>

#include <limits>

#include "models/qwen3_omni/layout.h"

namespace omnirt::models::qwen3_omni {
namespace {

TEST(AudioOutputLength, WorkedValues) {
    EXPECT_EQ(audio_output_length(0), 0);
    EXPECT_EQ(audio_output_length(1), 1);       // 1 -> 1 -> 1 -> 1
    EXPECT_EQ(audio_output_length(8), 1);       // 8 -> 4 -> 2 -> 1
    EXPECT_EQ(audio_output_length(9), 2);       // 9 -> 5 -> 3 -> 2
    EXPECT_EQ(audio_output_length(20), 3);      // 20 -> 10 -> 5 -> 3
    EXPECT_EQ(audio_output_length(40), 5);      // 40 -> 20 -> 10 -> 5
    EXPECT_EQ(audio_output_length(99), 13);     // 99 -> 50 -> 25 -> 13
    EXPECT_EQ(audio_output_length(100), 13);    // one full chunk, no leftover
    EXPECT_EQ(audio_output_length(101), 14);    // 13 + 1
    EXPECT_EQ(audio_output_length(130), 17);    // 13 + (30 -> 15 -> 8 -> 4)
    EXPECT_EQ(audio_output_length(250), 33);    // 26 + (50 -> 25 -> 13 -> 7)
    EXPECT_EQ(audio_output_length(3000), 390);  // 30 s of audio: 13 tokens a second
    EXPECT_EQ(audio_output_length(-5), 0);
}

TEST(AudioOutputLength, NeverDecreasesAndAddsAtMostOnePerFrame) {
    for (std::int64_t frames = 1; frames < 1000; ++frames) {
        const std::int64_t step = audio_output_length(frames) - audio_output_length(frames - 1);
        EXPECT_TRUE(step == 0 || step == 1) << frames;
    }
}

TEST(Layout, TokenCounts) {
    const LayoutConfig config;
    EXPECT_EQ(vision_token_count({.t = 1, .h = 4, .w = 6}, config, "image").value(), 6);
    EXPECT_EQ(vision_token_count({.t = 3, .h = 32, .w = 46}, config, "video").value(), 3 * 16 * 23);
    EXPECT_EQ(audio_token_count(250, "audio").value(), 33);
}

TEST(Layout, RejectsMalformedAndAbsurdItems) {
    const LayoutConfig config;
    const auto code = [](const auto& result) { return result.error().code; };
    EXPECT_EQ(code(vision_token_count({.t = 0, .h = 4, .w = 4}, config, "images[0]")),
              ErrorCode::invalid_argument);
    EXPECT_EQ(code(vision_token_count({.t = 1, .h = 3, .w = 4}, config, "images[0]")),
              ErrorCode::invalid_argument);
    EXPECT_EQ(code(vision_token_count({.t = 1, .h = -4, .w = 4}, config, "images[0]")),
              ErrorCode::invalid_argument);
    EXPECT_EQ(code(vision_token_count({.t = 1, .h = kMaxGridSide * 2, .w = 4}, config, "x")),
              ErrorCode::invalid_argument);
    // Every side within bounds, the product beyond 2^24 tokens.
    const auto huge = vision_token_count({.t = 64, .h = 2048, .w = 2048}, config, "videos[3]");
    EXPECT_EQ(code(huge), ErrorCode::out_of_range);
    EXPECT_NE(huge.error().message.find("videos[3]"), std::string::npos);
    EXPECT_EQ(code(audio_token_count(0, "audios[0]")), ErrorCode::invalid_argument);
    EXPECT_EQ(code(audio_token_count(kMaxMelFrames + 1, "audios[0]")), ErrorCode::invalid_argument);

    VideoItem video{.grid = {.t = 2, .h = 4, .w = 4}, .second_per_grid = 0.0};
    EXPECT_FALSE(validate(video, config, "videos[0]").has_value());
    video.second_per_grid = std::numeric_limits<double>::quiet_NaN();
    EXPECT_FALSE(validate(video, config, "videos[0]").has_value());
    video.second_per_grid = 0.5;
    EXPECT_TRUE(validate(video, config, "videos[0]").has_value());
    video.audio_mel_frames = -1;
    EXPECT_FALSE(validate(video, config, "videos[0]").has_value());
}

TEST(Layout, RejectsBadConfig) {
    EXPECT_TRUE(validate(LayoutConfig{}).has_value());
    EXPECT_FALSE(validate(LayoutConfig{.video_token_id = 151655}).has_value());  // = image id
    EXPECT_FALSE(validate(LayoutConfig{.audio_token_id = -1}).has_value());
    EXPECT_FALSE(validate(LayoutConfig{.position_id_per_seconds = 0}).has_value());
    EXPECT_FALSE(validate(LayoutConfig{.spatial_merge_size = 0}).has_value());
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

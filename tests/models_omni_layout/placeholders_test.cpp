// expand_placeholders: expected ids worked by hand from the Qwen3-Omni processor's rule
// (transformers replace_multimodal_special_tokens), spans, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "models/qwen3_omni/placeholders.h"
#include "test_tokens.h"

namespace omnirt::models::qwen3_omni {
namespace {

using namespace testing;  // NOLINT: the token constants

ExpandedPrompt expand(const std::vector<std::int64_t>& prompt, const MediaItems& media) {
    auto out = expand_placeholders(prompt, media);
    EXPECT_TRUE(out.has_value()) << out.error().to_string();
    return out.value_or(ExpandedPrompt{});
}

void expect_span(const MediaSpan& span, MediaKind kind, std::size_t index, std::size_t begin,
                 std::size_t end, std::int64_t count) {
    EXPECT_EQ(span.kind, kind);
    EXPECT_EQ(span.index, index);
    EXPECT_EQ(span.begin, begin);
    EXPECT_EQ(span.end, end);
    EXPECT_EQ(span.token_count, count);
}

TEST(Placeholders, TextOnlyIsUnchanged) {
    const std::vector<std::int64_t> prompt = {kImStart, 872, 198, 100, kImEnd};
    const ExpandedPrompt out = expand(prompt, {});
    EXPECT_EQ(out.token_ids, prompt);
    EXPECT_TRUE(out.spans.empty());
}

TEST(Placeholders, ImageAudioAndVideoInPromptOrder) {
    // audio (40 mel frames -> 5), image (1, 4, 6) -> 6, video (2, 2, 4) -> 2 · 1 · 2 = 4.
    const auto prompt = ids({{10, kAudioStart, kAudio, kAudioEnd, kVisionStart, kImage, kVisionEnd,
                              11, kVisionStart, kVideo, kVisionEnd}});
    const MediaItems media{.images = {{.t = 1, .h = 4, .w = 6}},
                           .videos = {{.grid = {.t = 2, .h = 2, .w = 4}}},
                           .audio_mel_frames = {40}};
    const ExpandedPrompt out = expand(prompt, media);
    EXPECT_EQ(out.token_ids, ids({{10, kAudioStart},
                                  repeat(kAudio, 5),
                                  {kAudioEnd, kVisionStart},
                                  repeat(kImage, 6),
                                  {kVisionEnd, 11, kVisionStart},
                                  repeat(kVideo, 4),
                                  {kVisionEnd}}));
    ASSERT_EQ(out.spans.size(), 3u);
    expect_span(out.spans[0], MediaKind::audio, 0, 2, 7, 5);
    expect_span(out.spans[1], MediaKind::image, 0, 9, 15, 6);
    expect_span(out.spans[2], MediaKind::video, 0, 18, 22, 4);
}

TEST(Placeholders, ItemsOfAKindAreTakenInOrder) {
    const auto prompt = ids({{kVisionStart, kImage, kVisionEnd, kVisionStart, kImage, kVisionEnd}});
    const MediaItems media{.images = {{.t = 1, .h = 2, .w = 2}, {.t = 1, .h = 4, .w = 4}}};
    const ExpandedPrompt out = expand(prompt, media);
    EXPECT_EQ(
        out.token_ids,
        ids({{kVisionStart, kImage, kVisionEnd, kVisionStart}, repeat(kImage, 4), {kVisionEnd}}));
    expect_span(out.spans[1], MediaKind::image, 1, 4, 8, 4);
}

TEST(Placeholders, AudioInVideoInterleavesByTime) {
    // Video (2, 4, 4), 0.5 s per grid: 4 tokens at time 0, 4 at 0.5 · 13 = 6.5; audio of 100 mel
    // frames: 13 tokens at 0..12. Video first while its time <= the audio index:
    // V V V V (0 <= 0), A0..A6 (6.5 > 6), V V V V (6.5 <= 7), A7..A12.
    const auto prompt = ids({{10, kVisionStart, kVideo, kVisionEnd, 11}});
    const MediaItems media{
        .videos = {
            {.grid = {.t = 2, .h = 4, .w = 4}, .second_per_grid = 0.5, .audio_mel_frames = 100}}};
    const ExpandedPrompt out = expand(prompt, media);
    EXPECT_EQ(out.token_ids, ids({{10, kVisionStart, kAudioStart},
                                  repeat(kVideo, 4),
                                  repeat(kAudio, 7),
                                  repeat(kVideo, 4),
                                  repeat(kAudio, 6),
                                  {kAudioEnd, kVisionEnd, 11}}));
    ASSERT_EQ(out.spans.size(), 2u);
    expect_span(out.spans[0], MediaKind::video, 0, 3, 24, 8);
    expect_span(out.spans[1], MediaKind::video_audio, 0, 3, 24, 13);
}

TEST(Placeholders, AudioInVideoLeftoverVideoComesLast) {
    // 2 s per grid: groups at 0, 26, 52; 3 audio tokens (20 frames) all fall before 26.
    const auto prompt = ids({{kVisionStart, kVideo, kVisionEnd}});
    const MediaItems media{
        .videos = {
            {.grid = {.t = 3, .h = 2, .w = 2}, .second_per_grid = 2.0, .audio_mel_frames = 20}}};
    EXPECT_EQ(expand(prompt, media).token_ids, ids({{kVisionStart, kAudioStart, kVideo},
                                                    repeat(kAudio, 3),
                                                    {kVideo, kVideo},
                                                    {kAudioEnd, kVisionEnd}}));
}

// Property: in an interleaved body, video token j of group g (time τ = g · s · 13) is preceded
// by exactly min(audio tokens, ceil(τ)) audio tokens (those with index k < τ).
TEST(Placeholders, InterleaveOrderingProperty) {
    for (const double seconds : {0.25, 0.5, 0.7, 1.0, 1.3, 2.0}) {
        for (const std::int64_t frames : {1, 37, 100, 260, 999}) {
            const VideoItem video{.grid = {.t = 5, .h = 4, .w = 2},
                                  .second_per_grid = seconds,
                                  .audio_mel_frames = frames};
            const auto out = expand({kVisionStart, kVideo, kVisionEnd}, {.videos = {video}});
            const std::int64_t audio_tokens = audio_output_length(frames);
            std::int64_t audio_seen = 0;
            std::int64_t video_seen = 0;
            for (const std::int64_t id : out.token_ids) {
                if (id == kAudio) ++audio_seen;
                if (id != kVideo) continue;
                const double time = static_cast<double>(video_seen / 2) * seconds * 13.0;
                const auto before = std::min<std::int64_t>(
                    audio_tokens, static_cast<std::int64_t>(std::ceil(time)));
                EXPECT_EQ(audio_seen, before) << seconds << " s, " << frames << " frames";
                ++video_seen;
            }
            EXPECT_EQ(video_seen, 10);
            EXPECT_EQ(audio_seen, audio_tokens);
        }
    }
}

TEST(Placeholders, CountMismatchIsAnError) {
    const auto prompt = ids({{kVisionStart, kImage, kVisionEnd}});
    const auto none = expand_placeholders(prompt, {});
    ASSERT_FALSE(none.has_value());
    EXPECT_EQ(none.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(none.error().message.find("<|image_pad|>"), std::string::npos);
    const MediaItems two{.images = {{.t = 1, .h = 2, .w = 2}, {.t = 1, .h = 2, .w = 2}}};
    EXPECT_FALSE(expand_placeholders(prompt, two).has_value());
    EXPECT_FALSE(expand_placeholders(std::vector<std::int64_t>{kAudioStart, kAudio, kAudioEnd},
                                     {.images = {{.t = 1, .h = 2, .w = 2}}})
                     .has_value());
}

TEST(Placeholders, PadOutsideItsTripletIsAnError) {
    const MediaItems image{.images = {{.t = 1, .h = 2, .w = 2}}};
    for (const auto& prompt :
         {ids({{kImage}}), ids({{kVisionStart, kImage}}), ids({{kAudioStart, kImage, kAudioEnd}}),
          ids({{kVisionStart, 5, kImage, kVisionEnd}})}) {
        const auto out = expand_placeholders(prompt, image);
        ASSERT_FALSE(out.has_value());
        EXPECT_NE(out.error().message.find("triplet"), std::string::npos) << out.error().message;
    }
    EXPECT_FALSE(expand_placeholders(std::vector<std::int64_t>{kVisionStart, kAudio, kVisionEnd},
                                     {.audio_mel_frames = {40}})
                     .has_value());
}

TEST(Placeholders, AbsurdSizesAreErrors) {
    const auto prompt = ids({{kVisionStart, kVideo, kVisionEnd}});
    const auto too_long =
        expand_placeholders(prompt, {.videos = {{.grid = {.t = 64, .h = 2048, .w = 2048}}}});
    ASSERT_FALSE(too_long.has_value());
    EXPECT_EQ(too_long.error().code, ErrorCode::out_of_range);
    // Each item fits, the sum does not.
    MediaItems many;
    std::vector<std::int64_t> many_prompt;
    for (int i = 0; i < 5; ++i) {
        many.videos.push_back({.grid = {.t = 16, .h = 1024, .w = 1024}});  // 2^22 tokens
        many_prompt.insert(many_prompt.end(), prompt.begin(), prompt.end());
    }
    EXPECT_EQ(expand_placeholders(many_prompt, many).error().code, ErrorCode::out_of_range);
    EXPECT_EQ(expand_placeholders(
                  prompt, {.videos = {{.grid = {.t = 1, .h = 2, .w = 2}, .second_per_grid = -1}}})
                  .error()
                  .code,
              ErrorCode::invalid_argument);
    EXPECT_EQ(expand_placeholders(std::vector<std::int64_t>{kAudioStart, kAudio, kAudioEnd},
                                  {.audio_mel_frames = {0}})
                  .error()
                  .code,
              ErrorCode::invalid_argument);
}

TEST(Placeholders, ConfigIdsAreUsed) {
    const LayoutConfig config{
        .image_token_id = 7, .vision_start_token_id = 5, .vision_end_token_id = 6};
    const auto out = expand_placeholders(std::vector<std::int64_t>{5, 7, 6},
                                         {.images = {{.t = 1, .h = 2, .w = 4}}}, config);
    ASSERT_TRUE(out.has_value()) << out.error().to_string();
    EXPECT_EQ(out->token_ids, (std::vector<std::int64_t>{5, 7, 7, 6}));
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

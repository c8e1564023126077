// compute_rope_index against worked examples derived by hand from transformers' Qwen3-Omni
// get_rope_index (the arrays below were reasoned out from its algorithm, not produced by this
// code), plus properties. Positions are compared exactly: every value here is exact in float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "models/qwen3_omni/placeholders.h"
#include "models/qwen3_omni/rope_index.h"
#include "test_tokens.h"

namespace omnirt::models::qwen3_omni {
namespace {

using namespace testing;  // NOLINT: the token constants
using Axis = std::vector<float>;

RopeIndex rope(const std::vector<std::int64_t>& prompt, const MediaItems& media) {
    auto out = compute_rope_index(prompt, media);
    EXPECT_TRUE(out.has_value()) << out.error().to_string();
    return out.value_or(RopeIndex{});
}

void expect_positions(const RopeIndex& index, const Axis& t, const Axis& h, const Axis& w,
                      float delta) {
    EXPECT_EQ(index.positions[0], t);
    EXPECT_EQ(index.positions[1], h);
    EXPECT_EQ(index.positions[2], w);
    EXPECT_EQ(index.rope_delta, delta);
}

Axis range(float from, int count) {
    Axis out;
    for (int i = 0; i < count; ++i) out.push_back(from + static_cast<float>(i));
    return out;
}

Axis cat(std::initializer_list<Axis> parts) {
    Axis out;
    for (const Axis& part : parts) out.insert(out.end(), part.begin(), part.end());
    return out;
}

// Worked example 1: text only — 0..n-1 on every axis, delta 0.
TEST(RopeIndex, WorkedTextOnly) {
    const std::vector<std::int64_t> prompt = {kImStart, 872, 198, 100, 101, kImEnd, 198};
    const Axis all = range(0, 7);
    expect_positions(rope(prompt, {}), all, all, all, 0);
}

// Audio only: transformers passes no grid and takes its text-only branch (0..n-1); the audio
// span's positions are consecutive, so the walk gives the same. 40 mel frames -> 5 tokens.
TEST(RopeIndex, WorkedAudioOnly) {
    const auto prompt = ids({{10, kAudioStart}, repeat(kAudio, 5), {kAudioEnd, 11}});
    const Axis all = range(0, 9);
    expect_positions(rope(prompt, {.audio_mel_frames = {40}}), all, all, all, 0);
}

// Worked example 2: one image, grid (1, 4, 6) -> merged 2 x 3 = 6 tokens.
// 10 -> 0, 11 -> 1, <|vision_start|> -> 2, body from 3: T 3, H 3 + row, W 3 + col;
// <|vision_end|> at max(body) + 1 = 5 + 1 = 6, then 7, 8. delta = 9 - 12 = -3.
TEST(RopeIndex, WorkedOneImage) {
    const auto prompt = ids({{10, 11, kVisionStart}, repeat(kImage, 6), {kVisionEnd, 12, 13}});
    const MediaItems media{.images = {{.t = 1, .h = 4, .w = 6}}};
    expect_positions(rope(prompt, media), {0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8},
                     {0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8}, {0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8},
                     -3);
}

// Worked example 3: image (1, 4, 4) -> 2 x 2, then audio of 40 mel frames -> 5 tokens.
// 10 -> 0, vs -> 1, image from 2 (max 3), ve -> 4, as -> 5, audio 6..10, ae -> 11, 11 -> 12.
// delta = 13 - 15 = -2.
TEST(RopeIndex, WorkedImageAndAudio) {
    const auto prompt = ids({{10, kVisionStart},
                             repeat(kImage, 4),
                             {kVisionEnd, kAudioStart},
                             repeat(kAudio, 5),
                             {kAudioEnd, 11}});
    const MediaItems media{.images = {{.t = 1, .h = 4, .w = 4}}, .audio_mel_frames = {40}};
    expect_positions(rope(prompt, media), cat({{0, 1, 2, 2, 2, 2}, range(4, 9)}),
                     cat({{0, 1, 2, 2, 3, 3}, range(4, 9)}), cat({{0, 1, 2, 3, 2, 3}, range(4, 9)}),
                     -2);
}

// Worked example 4: video (2, 4, 4) at 0.5 s per grid with its soundtrack of 100 mel frames
// (13 tokens). Body order (placeholders_test): V x4, A0..A6, V x4, A7..A12.
// 10 -> 0, <|vision_start|><|audio_start|> -> 1, 2; start 3. Video group 0: T 3, group 1:
// T 3 + 0.5 · 13 = 9.5; H 3 + row, W 3 + col. Audio k: 3 + k. The last group appended is the
// audio tail A7..A12 (max 15): <|audio_end|> 16, <|vision_end|> 17, 11 -> 18.
// delta = 19 - 27 = -8.
TEST(RopeIndex, WorkedVideoWithAudioInterleaved) {
    const auto prompt = ids({{10, kVisionStart, kAudioStart},
                             repeat(kVideo, 4),
                             repeat(kAudio, 7),
                             repeat(kVideo, 4),
                             repeat(kAudio, 6),
                             {kAudioEnd, kVisionEnd, 11}});
    const MediaItems media{
        .videos = {
            {.grid = {.t = 2, .h = 4, .w = 4}, .second_per_grid = 0.5, .audio_mel_frames = 100}}};
    const Axis head = {0, 1, 2};
    const Axis audio_head = range(3, 7);  // A0..A6
    const Axis tail = range(10, 9);       // A7..A12, ae, ve, text
    expect_positions(rope(prompt, media),
                     cat({head, {3, 3, 3, 3}, audio_head, {9.5f, 9.5f, 9.5f, 9.5f}, tail}),
                     cat({head, {3, 3, 4, 4}, audio_head, {3, 3, 4, 4}, tail}),
                     cat({head, {3, 4, 3, 4}, audio_head, {3, 4, 3, 4}, tail}), -8);
}

// Video without soundtrack at 2 s per grid: grid (2, 2, 4) -> 1 x 2 per group, group 1 at
// T = 1 + 26 = 27. <|vision_end|> at 28, text 29; delta = 30 - 7 = +23.
TEST(RopeIndex, WorkedPlainVideo) {
    const auto prompt = ids({{kVisionStart}, repeat(kVideo, 4), {kVisionEnd, 10}});
    const MediaItems media{.videos = {{.grid = {.t = 2, .h = 2, .w = 4}, .second_per_grid = 2}}};
    expect_positions(rope(prompt, media), {0, 1, 1, 27, 27, 28, 29}, {0, 1, 1, 1, 1, 28, 29},
                     {0, 1, 2, 1, 2, 28, 29}, 23);
}

// transformers' quirk kept on purpose: after audio-in-video the end tokens follow the max of
// the last group appended (here the audio tail, max 4), not the whole body (video H reaches 5).
// Video (1, 8, 2) -> 4 x 1 at time 0; soundtrack of 20 frames -> 3 tokens.
TEST(RopeIndex, AudioInVideoEndFollowsTheLastTail) {
    const auto prompt = ids({{kVisionStart, kAudioStart},
                             repeat(kVideo, 4),
                             repeat(kAudio, 3),
                             {kAudioEnd, kVisionEnd}});
    const MediaItems media{
        .videos = {
            {.grid = {.t = 1, .h = 8, .w = 2}, .second_per_grid = 2, .audio_mel_frames = 20}}};
    expect_positions(rope(prompt, media), {0, 1, 2, 2, 2, 2, 2, 3, 4, 5, 6},
                     {0, 1, 2, 3, 4, 5, 2, 3, 4, 5, 6}, {0, 1, 2, 2, 2, 2, 2, 3, 4, 5, 6}, -4);
}

// A fractional T that is the body's max carries into the text after it (no truncation): grid
// (2, 2, 2) -> one token per group, 0.8 s per grid: T = 1 + (1 · 0.8f) · 13 in float32.
TEST(RopeIndex, FractionalVideoPositionCarriesIntoText) {
    const auto prompt = ids({{kVisionStart, kVideo, kVideo, kVisionEnd, 10}});
    const MediaItems media{.videos = {{.grid = {.t = 2, .h = 2, .w = 2}, .second_per_grid = 0.8}}};
    const RopeIndex index = rope(prompt, media);
    const float t1 = (1.0f * 0.8f) * 13.0f + 1.0f;
    EXPECT_NE(t1, std::floor(t1));
    EXPECT_EQ(index.positions[0], (Axis{0, 1, t1, t1 + 1.0f, t1 + 1.0f + 1.0f}));
    EXPECT_EQ(index.positions[1], (Axis{0, 1, 1, t1 + 1.0f, t1 + 1.0f + 1.0f}));
    EXPECT_EQ(index.rope_delta, (t1 + 1.0f + 1.0f + 1.0f) - 5.0f);
}

TEST(RopeIndex, TextOnlyPropertyAnyLength) {
    for (int n : {0, 1, 2, 17, 1000}) {
        std::vector<std::int64_t> prompt(static_cast<std::size_t>(n), 42);
        const RopeIndex index = rope(prompt, {});
        const Axis all = range(0, n);
        for (const Axis& axis : index.positions) EXPECT_EQ(axis, all);
        EXPECT_EQ(index.rope_delta, 0);
    }
}

// Properties over images of many shapes after a text prefix: the body ends at
// st + max(gh, gw) - 1, <|vision_end|> right after, delta = max + 1 - n.
TEST(RopeIndex, ImageEndsAtStartPlusLongerSide) {
    for (const std::int64_t h : {2, 4, 10, 32}) {
        for (const std::int64_t w : {2, 6, 14}) {
            const GridThw grid{.t = 1, .h = h, .w = w};
            const auto prompt = ids({{7, 7, 7, kVisionStart, kImage, kVisionEnd, 8, 9}});
            const auto expanded = expand_placeholders(prompt, {.images = {grid}});
            ASSERT_TRUE(expanded.has_value());
            const RopeIndex index = rope(expanded->token_ids, {.images = {grid}});
            const float st = 4;  // 3 text tokens and the bos
            const std::size_t eos = expanded->spans[0].end;
            const std::array<float, 3> axis_max = {st, st + static_cast<float>(h / 2) - 1,
                                                   st + static_cast<float>(w / 2) - 1};
            for (std::size_t a = 0; a < 3; ++a) {
                const Axis& axis = index.positions[a];
                EXPECT_EQ(*std::max_element(axis.begin() + 4, axis.begin() + eos), axis_max[a]);
                EXPECT_EQ(axis[eos], st + static_cast<float>(std::max(h, w) / 2) - 1 + 1);
            }
            float max = 0;
            for (const Axis& axis : index.positions) {
                max = std::max(max, *std::max_element(axis.begin(), axis.end()));
            }
            EXPECT_EQ(index.rope_delta, max + 1 - static_cast<float>(expanded->token_ids.size()));
        }
    }
}

// A conversation's positions do not depend on what follows: the prompt's positions are a prefix
// of the positions of prompt + answer + next turn, and the answer's tokens sit where decode put
// them (row + rope_delta).
TEST(RopeIndex, MultiTurnPrefixAndDecodePositions) {
    const MediaItems first_media{.images = {{.t = 1, .h = 4, .w = 6}}, .audio_mel_frames = {130}};
    const auto first_prompt =
        expand_placeholders(ids({{kImStart, 872, 198, kVisionStart, kImage, kVisionEnd, kAudioStart,
                                  kAudio, kAudioEnd, 100, kImEnd, 198, kImStart, 77091, 198}}),
                            first_media);
    ASSERT_TRUE(first_prompt.has_value());
    const RopeIndex first = rope(first_prompt->token_ids, first_media);

    // The answer, then a second user turn with another image ((1, 2, 2): one pad, so its
    // triplet is already expanded).
    const std::vector<std::int64_t> answer = {300, 301, 302, kImEnd, 198};
    MediaItems full_media = first_media;
    full_media.images.push_back({.t = 1, .h = 2, .w = 2});
    const auto full_ids = ids({first_prompt->token_ids,
                               answer,
                               {kImStart, 872, 198, kVisionStart, kImage, kVisionEnd, kImEnd}});
    const RopeIndex full = rope(full_ids, full_media);
    const std::size_t n = first_prompt->token_ids.size();
    for (std::size_t axis = 0; axis < 3; ++axis) {
        for (std::size_t row = 0; row < n; ++row) {
            EXPECT_EQ(full.positions[axis][row], first.positions[axis][row]) << row;
        }
        for (std::size_t k = 0; k < answer.size(); ++k) {
            EXPECT_EQ(full.positions[axis][n + k],
                      decode_position(static_cast<std::int64_t>(n + k), first.rope_delta));
        }
    }
}

TEST(RopeIndex, SpanItemMismatchesAreErrors) {
    const auto image_prompt = ids({{kVisionStart}, repeat(kImage, 4), {kVisionEnd}});
    const GridThw grid{.t = 1, .h = 4, .w = 4};
    const auto error = [](const std::vector<std::int64_t>& prompt, const MediaItems& media) {
        const auto out = compute_rope_index(prompt, media);
        EXPECT_FALSE(out.has_value());
        return out.has_value() ? std::string() : out.error().message;
    };
    EXPECT_NE(error(image_prompt, {}).find("no image item"), std::string::npos);
    EXPECT_NE(error(image_prompt, {.images = {grid, grid}}).find("1 image span"),
              std::string::npos);
    EXPECT_NE(error(image_prompt, {.images = {{.t = 1, .h = 4, .w = 6}}}).find("expects 6 pads"),
              std::string::npos);
    EXPECT_NE(
        error(ids({{kVisionStart}, repeat(kImage, 4)}), {.images = {grid}}).find("<|vision_end|>"),
        std::string::npos);
    EXPECT_NE(error(ids({{10, kImage, 11}}), {}).find("outside a media span"), std::string::npos);
    EXPECT_NE(error(ids({{10, kVisionEnd}}), {}).find("outside a media span"), std::string::npos);
    EXPECT_NE(error(ids({{kVisionStart, 10, kVisionEnd}}), {}).find("must be followed"),
              std::string::npos);
    EXPECT_NE(error(ids({{kVisionStart}}), {}).find("must be followed"), std::string::npos);
    // A video whose item has a soundtrack but whose span is a plain video, and the reverse.
    const VideoItem with_audio{.grid = grid, .audio_mel_frames = 20};
    EXPECT_NE(
        error(ids({{kVisionStart}, repeat(kVideo, 4), {kVisionEnd}}), {.videos = {with_audio}})
            .find("not laid out as audio-in-video"),
        std::string::npos);
    EXPECT_NE(error(ids({{kVisionStart, kAudioStart},
                         repeat(kVideo, 4),
                         repeat(kAudio, 3),
                         {kAudioEnd, kVisionEnd}}),
                    {.videos = {{.grid = grid}}})
                  .find("has no soundtrack"),
              std::string::npos);
    // Interleaved body with one audio pad too few.
    EXPECT_NE(error(ids({{kVisionStart, kAudioStart},
                         repeat(kVideo, 4),
                         repeat(kAudio, 2),
                         {kAudioEnd, kVisionEnd}}),
                    {.videos = {with_audio}})
                  .find("interleaved"),
              std::string::npos);
}

TEST(RopeIndex, PositionsBeyondFloatExactnessAreRefused) {
    // 2^16 temporal groups at 3600 s per grid reach T ~ 3e9.
    const VideoItem video{.grid = {.t = 65536, .h = 2, .w = 2}, .second_per_grid = 3600};
    const auto prompt = ids({{kVisionStart}, repeat(kVideo, 65536), {kVisionEnd}});
    const auto out = compute_rope_index(prompt, {.videos = {video}});
    ASSERT_FALSE(out.has_value());
    EXPECT_EQ(out.error().code, ErrorCode::out_of_range);
}

TEST(RopeIndex, DecodePosition) {
    EXPECT_EQ(decode_position(27, -8), 19);
    EXPECT_EQ(decode_position(7, 23), 30);
    EXPECT_EQ(decode_position(0, 0), 0);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

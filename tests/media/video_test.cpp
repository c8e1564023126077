// Video decoding, sampling and patches on the small committed videos
// (tests/media/goldens/make_videos.sh: 96x64, 10 fps, 3 s, frame N has luma 8 N).
#include "media/video.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "media/golden_file.h"
#include "media/test_audio.h"

namespace omnirt::media {
namespace {

std::string video_file(const std::string& name) {
    return testing::read_file_bytes(testing::golden_path(name));
}
std::span<const std::byte> bytes_of(const std::string& data) {
    return std::as_bytes(std::span<const char>(data.data(), data.size()));
}

// Mean of the R channel of a frame.
double mean_red(const RgbImage& image) {
    double sum = 0;
    for (std::size_t i = 0; i < image.pixels.size(); i += 3) sum += image.pixels[i];
    return sum / (static_cast<double>(image.pixels.size()) / 3);
}

TEST(SampleVideoFrames, FollowsTheReferenceRecipe) {
    // 30 frames at 10 fps: 3 s * 2 fps = 6 frames.
    auto a = sample_video_frames(30, 10.0);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->indices, (std::vector<std::int64_t>{0, 6, 12, 17, 23, 29}));
    EXPECT_DOUBLE_EQ(a->sample_fps, 2.0);
    // Short clip: at least 4 frames.
    auto b = sample_video_frames(10, 30.0);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->indices, (std::vector<std::int64_t>{0, 3, 6, 9}));
    EXPECT_DOUBLE_EQ(b->sample_fps, 12.0);
    // Odd frame count floored to even, bounded by the total.
    auto c = sample_video_frames(3, 1.0);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->indices, (std::vector<std::int64_t>{0, 2}));
    // Long video: at most 768.
    auto d = sample_video_frames(100000, 25.0);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->indices.size(), 768u);
    EXPECT_EQ(d->indices.front(), 0);
    EXPECT_EQ(d->indices.back(), 99999);
    for (std::size_t i = 1; i < d->indices.size(); ++i) {
        EXPECT_LT(d->indices[i - 1], d->indices[i]);
    }
    // torch.linspace(0, 9, 4) = [0, 3, 6, 9]; linspace(0, 4, 4) = [0, 1.33, 2.67, 4].
    auto e = sample_video_frames(5, 1.0, {.min_frames = 4});
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->indices, (std::vector<std::int64_t>{0, 1, 3, 4}));
    EXPECT_FALSE(sample_video_frames(1, 30.0).has_value());
    EXPECT_FALSE(sample_video_frames(10, 0.0).has_value());
    EXPECT_FALSE(sample_video_frames(10, std::nan("")).has_value());
}

TEST(DecodeVideo, DecodesEveryContainerAndCodec) {
    for (const char* name :
         {"video_h264_aac.mp4", "video_vp9_opus.webm", "video_vp8.webm", "video_av1_opus.mkv"}) {
        const std::string data = video_file(name);
        auto video = decode_video(bytes_of(data));
        ASSERT_TRUE(video.has_value()) << name << ": " << video.error().to_string();
        EXPECT_EQ(video->total_frames, 30) << name;
        EXPECT_DOUBLE_EQ(video->video_fps, 10.0) << name;
        ASSERT_EQ(video->frames.size(), 6u) << name;
        EXPECT_EQ(video->frame_indices, (std::vector<std::int64_t>{0, 6, 12, 17, 23, 29}));
        for (std::size_t i = 0; i < video->frames.size(); ++i) {
            const RgbImage& frame = video->frames[i];
            // 96x64 is below 131072 pixels: smart_resize scales it up to 448 x 320.
            EXPECT_EQ(frame.width, 448);
            EXPECT_EQ(frame.height, 320);
            // Limited-range luma 8 N -> RGB (8 N - 16) * 255 / 219, within codec loss.
            const double luma = 8.0 * static_cast<double>(video->frame_indices[i]);
            const double expected = std::clamp((luma - 16.0) * 255.0 / 219.0, 0.0, 255.0);
            EXPECT_NEAR(mean_red(frame), expected, 6.0) << name << " frame " << i;
        }
        const bool has_audio = std::string(name) != "video_vp8.webm";
        EXPECT_EQ(video->has_audio, has_audio) << name;
        if (has_audio) {
            // 3 s at 16 kHz, give or take codec padding; a 440 Hz tone.
            EXPECT_NEAR(static_cast<double>(video->audio_16k_mono.size()), 48000.0, 2000.0) << name;
            EXPECT_GT(testing::rms(video->audio_16k_mono), 0.05) << name;  // sine at 1/8
        }
    }
}

TEST(FrameSizeFor, BoundsTheTotalPixels) {
    // Few frames: the HF processor's per-frame bounds (131072 .. 786432 pixels).
    auto hd = frame_size_for(1080, 1920, 8);
    ASSERT_TRUE(hd.has_value());
    EXPECT_LE(std::int64_t{hd->height} * hd->width, 786432);
    EXPECT_EQ(hd->height % 32, 0);
    // 768 frames: max_total_pixels / 768 * 2 = 307200 pixels per frame.
    auto many = frame_size_for(1080, 1920, 768);
    ASSERT_TRUE(many.has_value());
    EXPECT_LE(std::int64_t{many->height} * many->width, 307200);
    EXPECT_GE(std::int64_t{many->height} * many->width, 131072);
    EXPECT_FALSE(frame_size_for(1080, 1920, 0).has_value());
}

TEST(PreprocessVideo, PatchesAndSecondsPerGrid) {
    const std::string data = video_file("video_h264_aac.mp4");
    auto input = preprocess_video(bytes_of(data));
    ASSERT_TRUE(input.has_value()) << input.error().to_string();
    // 96x64 is below 131072 pixels: smart_resize scales it up to 448 x 320 (143360 pixels).
    EXPECT_EQ(input->patches.grid_t, 3);
    EXPECT_EQ(input->patches.grid_h, 20);
    EXPECT_EQ(input->patches.grid_w, 28);
    EXPECT_EQ(input->patches.rows, 3 * 20 * 28);
    EXPECT_EQ(input->patches.pixels.size(), 3u * 20 * 28 * kVisionPatchDim);
    EXPECT_EQ(input->patches.llm_tokens(), 420);
    EXPECT_DOUBLE_EQ(input->sample_fps, 2.0);
    EXPECT_DOUBLE_EQ(input->second_per_grid, 1.0);
    // The two frames of temporal group 0 are frames 0 and 6 (darker, then brighter).
    const float* row = input->patches.pixels.data();
    const float first = row[0 * 256 + 100];   // channel 0, frame 0
    const float second = row[1 * 256 + 100];  // channel 0, frame 1
    EXPECT_LT(first, second);
    auto no_audio = preprocess_video(bytes_of(data), {.decode_audio = false});
    ASSERT_TRUE(no_audio.has_value());
    EXPECT_FALSE(no_audio->has_audio);
    EXPECT_TRUE(no_audio->audio_16k_mono.empty());
}

TEST(DecodeVideo, HostileInputsFailClearly) {
    auto empty = decode_video({});
    ASSERT_FALSE(empty.has_value());
    EXPECT_EQ(empty.error().code, ErrorCode::invalid_argument);

    const std::string one = video_file("video_one_frame.mp4");
    auto single = decode_video(bytes_of(one));
    ASSERT_FALSE(single.has_value());
    EXPECT_NE(single.error().message.find("at least 2"), std::string::npos)
        << single.error().message;

    // An image is not a video container.
    const std::string png = "\x89PNG\r\n\x1A\n0000000000000000000000000000";
    EXPECT_FALSE(decode_video(bytes_of(png)).has_value());

    std::mt19937 random(3);
    std::string garbage(10000, '\0');
    for (char& c : garbage) c = static_cast<char>(random());
    auto noise = decode_video(bytes_of(garbage));
    ASSERT_FALSE(noise.has_value());
    EXPECT_EQ(noise.error().code, ErrorCode::invalid_argument);

    for (const char* name : {"video_h264_aac.mp4", "video_vp9_opus.webm", "video_av1_opus.mkv"}) {
        const std::string whole = video_file(name);
        for (std::size_t keep :
             {std::size_t{16}, whole.size() / 4, whole.size() / 2, whole.size() - 7}) {
            (void)decode_video(bytes_of(whole.substr(0, keep)));  // any result but a crash
        }
        for (int round = 0; round < 10; ++round) {
            std::string corrupt = whole;
            for (int flips = 0; flips < 20; ++flips) {
                corrupt[random() % corrupt.size()] = static_cast<char>(random());
            }
            (void)preprocess_video(bytes_of(corrupt));
        }
    }

    const std::string mp4 = video_file("video_h264_aac.mp4");
    auto too_long = decode_video(bytes_of(mp4), {.max_duration_seconds = 1.0});
    ASSERT_FALSE(too_long.has_value());
    EXPECT_EQ(too_long.error().code, ErrorCode::out_of_range);
    auto too_many = decode_video(bytes_of(mp4), {.max_total_frames = 10});
    ASSERT_FALSE(too_many.has_value());
    EXPECT_EQ(too_many.error().code, ErrorCode::out_of_range);
    auto too_big = decode_video(bytes_of(mp4), {.max_frame_pixels = 1000});
    ASSERT_FALSE(too_big.has_value());
    EXPECT_EQ(too_big.error().code, ErrorCode::resource_exhausted);
    auto long_audio = decode_video(bytes_of(mp4), {.max_audio_seconds = 1.0});
    ASSERT_FALSE(long_audio.has_value());
    EXPECT_EQ(long_audio.error().code, ErrorCode::out_of_range);
}

}  // namespace
}  // namespace omnirt::media

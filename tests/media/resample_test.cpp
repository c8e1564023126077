#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "media/test_audio.h"

namespace omnirt::media {
namespace {

using testing::best_correlation;
using testing::rms;
using testing::sine;

std::vector<float> channel(const AudioBuffer& buffer, int c) {
    std::vector<float> out;
    for (std::int64_t f = 0; f < buffer.frames(); ++f)
        out.push_back(buffer.samples[f * buffer.channels + c]);
    return out;
}

// Counts sign changes from negative to non-negative: ~ frequency * duration for a sine.
int rising_zero_crossings(const std::vector<float>& samples) {
    int count = 0;
    for (std::size_t i = 1; i < samples.size(); ++i) count += samples[i - 1] < 0 && samples[i] >= 0;
    return count;
}

TEST(ResampledFrames, RoundsHalfUp) {
    EXPECT_EQ(resampled_frames(24000, 24000, 48000), 48000);
    EXPECT_EQ(resampled_frames(48000, 48000, 24000), 24000);
    EXPECT_EQ(resampled_frames(1, 48000, 24000), 1);  // 0.5 rounds up
    EXPECT_EQ(resampled_frames(1, 48000, 16000), 0);  // 0.33 rounds down
    EXPECT_EQ(resampled_frames(441, 44100, 48000), 480);
    EXPECT_EQ(resampled_frames(22050, 22050, 48000), 48000);
    EXPECT_EQ(resampled_frames(1000, 44100, 48000), 1088);  // 1088.435
    EXPECT_EQ(resampled_frames(0, 44100, 48000), 0);
    EXPECT_EQ(resampled_frames(-5, 44100, 48000), 0);
    EXPECT_EQ(resampled_frames(100, 0, 48000), 0);
    // No overflow for the largest frame counts.
    const std::int64_t big = std::numeric_limits<std::int64_t>::max() / 2;
    EXPECT_EQ(resampled_frames(big, 48000, 24000), big / 2 + 1);  // big is odd: half rounds up
}

TEST(Resample, LengthMatchesTheRuleAndToneKeepsItsFrequency) {
    for (auto [from, to] :
         {std::pair{24000, 48000}, std::pair{48000, 24000}, std::pair{44100, 16000},
          std::pair{22050, 48000}, std::pair{16000, 44100}}) {
        const AudioBuffer input = sine(from, 0.5, 440.0, 2);
        auto output = resample(input, to);
        ASSERT_TRUE(output.has_value()) << output.error().to_string();
        EXPECT_EQ(output->sample_rate, to);
        EXPECT_EQ(output->channels, 2);
        EXPECT_EQ(output->frames(), resampled_frames(input.frames(), from, to))
            << from << "->" << to;
        const AudioBuffer reference = sine(to, 0.5, 440.0, 2);
        for (int c = 0; c < 2; ++c) {
            EXPECT_GT(best_correlation(channel(reference, c), channel(*output, c), 0), 0.99)
                << from << "->" << to << " channel " << c;
        }
        EXPECT_NEAR(rms(output->samples), rms(input.samples), 0.02);
    }
}

TEST(Resample, SameRateIsACopyAndEmptyStaysEmpty) {
    const AudioBuffer input = sine(24000, 0.01);
    auto same = resample(input, 24000);
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(same->samples, input.samples);
    auto empty = resample(AudioBuffer{.sample_rate = 24000, .channels = 1, .samples = {}}, 48000);
    ASSERT_TRUE(empty.has_value());
    EXPECT_TRUE(empty->samples.empty());
    EXPECT_EQ(empty->sample_rate, 48000);
}

TEST(Resample, RejectsBadRates) {
    const AudioBuffer input = sine(24000, 0.01);
    for (int rate : {0, -1, 999, 768001, std::numeric_limits<int>::max()}) {
        auto output = resample(input, rate);
        ASSERT_FALSE(output.has_value()) << rate;
        EXPECT_EQ(output.error().code, ErrorCode::invalid_argument);
    }
    EXPECT_FALSE(
        resample(AudioBuffer{.sample_rate = 0, .channels = 1, .samples = {0}}, 24000).has_value());
}

TEST(ChangeSpeed, DurationScalesAndPitchFollows) {
    const AudioBuffer input = sine(24000, 1.0, 440.0);
    const int input_crossings = rising_zero_crossings(input.samples);
    for (double factor : {0.25, 0.5, 0.8, 1.5, 2.0, 4.0}) {
        auto output = change_speed(input, factor);
        ASSERT_TRUE(output.has_value()) << output.error().to_string();
        EXPECT_EQ(output->sample_rate, 24000);
        EXPECT_EQ(output->frames(), std::llround(24000 / factor)) << factor;
        // The same number of cycles in 1/factor the time: the pitch is factor * 440 Hz.
        EXPECT_NEAR(rising_zero_crossings(output->samples), input_crossings, 3) << factor;
    }
}

TEST(ChangeSpeed, OneIsACopy) {
    const AudioBuffer input = sine(24000, 0.01);
    auto same = change_speed(input, 1.0);
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(same->samples, input.samples);
}

TEST(ChangeSpeed, RejectsOutOfRangeFactors) {
    const AudioBuffer input = sine(24000, 0.01);
    for (double factor : {0.0, -1.0, 0.2499, 4.0001, 100.0, std::nan(""),
                          std::numeric_limits<double>::infinity()}) {
        auto output = change_speed(input, factor);
        ASSERT_FALSE(output.has_value()) << factor;
        EXPECT_EQ(output.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(output.error().message.find("0.25..4.0"), std::string::npos);
    }
}

}  // namespace
}  // namespace omnirt::media

namespace omnirt::media {
namespace {

std::size_t thread_count() {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/task")) {
        ++count;
    }
    return count;
}

// libsoxr's one-shot API runs on the calling thread; libsndfile has no threads either.
TEST(MediaThreads, NothingStartsThreads) {
    const std::size_t before = thread_count();
    const AudioBuffer input = testing::sine(44100, 0.2, 440.0, 2);
    ASSERT_TRUE(resample(input, 48000).has_value());
    ASSERT_TRUE(change_speed(input, 1.5).has_value());
    for (AudioFormat format : {AudioFormat::flac, AudioFormat::opus, AudioFormat::mp3}) {
        if (!format_available(format)) continue;
        auto bytes = encode_audio(input, format);
        ASSERT_TRUE(bytes.has_value());
        ASSERT_TRUE(decode_audio(testing::as_bytes(*bytes)).has_value());
    }
    EXPECT_EQ(thread_count(), before);
}

}  // namespace
}  // namespace omnirt::media

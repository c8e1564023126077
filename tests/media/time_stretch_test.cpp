// TimeStretcher (Rubber Band): speed 1 is a bit-exact passthrough, the duration scales by
// 1/speed exactly, the pitch of a sine is kept (a resample would scale it), streamed chunks give
// what the whole buffer gives, and bad arguments are errors.
#include "media/time_stretch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_audio.h"

namespace omnirt::media {
namespace {

using testing::rms;
using testing::sine;

// The frequency of a (near) sine from its rising zero crossings over the middle half of channel
// `channel`, away from the stretcher's start and end transients.
double dominant_hz(const AudioBuffer& audio, int channel = 0) {
    const std::int64_t frames = audio.frames();
    const std::int64_t begin = frames / 4;
    const std::int64_t end = frames * 3 / 4;
    auto at = [&](std::int64_t f) { return audio.samples[f * audio.channels + channel]; };
    double first = -1;
    double last = -1;
    int crossings = 0;
    for (std::int64_t f = begin + 1; f < end; ++f) {
        if (at(f - 1) < 0 && at(f) >= 0) {
            const double t = f - 1 + at(f - 1) / (at(f - 1) - at(f));  // interpolated
            if (first < 0) first = t;
            last = t;
            ++crossings;
        }
    }
    if (crossings < 2) return 0;
    return (crossings - 1) * audio.sample_rate / (last - first);
}

TEST(TimeStretchTest, SpeedOneIsABitExactPassthrough) {
    const AudioBuffer input = sine(44100, 0.3, 440.0, 2);
    auto stretcher = TimeStretcher::create(1.0, 44100, 2);
    ASSERT_TRUE(stretcher.has_value());
    auto out = (*stretcher)->push(input);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->samples, input.samples);  // exact float equality
    auto tail = (*stretcher)->finish();
    ASSERT_TRUE(tail.has_value());
    EXPECT_TRUE(tail->samples.empty());
    auto whole = time_stretch(input, 1.0);
    ASSERT_TRUE(whole.has_value());
    EXPECT_EQ(whole->samples, input.samples);
}

TEST(TimeStretchTest, DurationScalesByOneOverSpeed) {
    const AudioBuffer input = sine(44100, 1.0, 440.0);
    for (double speed : {0.25, 0.5, 0.8, 1.25, 2.0, 3.3, 4.0}) {
        auto out = time_stretch(input, speed);
        ASSERT_TRUE(out.has_value()) << speed << ": " << out.error().to_string();
        EXPECT_EQ(out->frames(), std::llround(44100 / speed)) << speed;
        EXPECT_EQ(out->sample_rate, 44100);
    }
}

TEST(TimeStretchTest, PitchIsKept) {
    for (int rate : {24000, 44100}) {
        const AudioBuffer input = sine(rate, 1.0, 440.0, 2);
        ASSERT_NEAR(dominant_hz(input), 440.0, 0.5);
        for (double speed : {0.5, 0.75, 1.5, 2.0}) {
            auto out = time_stretch(input, speed);
            ASSERT_TRUE(out.has_value());
            for (int channel : {0, 1}) {
                EXPECT_NEAR(dominant_hz(*out, channel), 440.0, 440.0 * 0.02)
                    << "rate " << rate << " speed " << speed << " channel " << channel;
            }
            // The level stays (a stretch is no fade).
            EXPECT_NEAR(rms(out->samples), rms(input.samples), rms(input.samples) * 0.25) << speed;
        }
    }
    // What a resample does instead: the tone goes up an octave at speed 2.
    auto resampled = change_speed(sine(44100, 1.0, 440.0), 2.0);
    ASSERT_TRUE(resampled.has_value());
    EXPECT_NEAR(dominant_hz(*resampled), 880.0, 880.0 * 0.02);
}

TEST(TimeStretchTest, StreamedChunksGiveTheWholeBuffersLengthAndTone) {
    const AudioBuffer input = sine(44100, 1.5, 330.0);
    std::mt19937 random(7);
    for (double speed : {0.5, 1.7}) {
        auto stretcher = TimeStretcher::create(speed, 44100, 1);
        ASSERT_TRUE(stretcher.has_value());
        AudioBuffer streamed{.sample_rate = 44100, .channels = 1};
        std::size_t at = 0;
        while (at < input.samples.size()) {
            const std::size_t size =
                std::min<std::size_t>(input.samples.size() - at, 1 + random() % 5000);
            AudioBuffer chunk{.sample_rate = 44100, .channels = 1};
            chunk.samples.assign(input.samples.begin() + at, input.samples.begin() + at + size);
            at += size;
            auto out = (*stretcher)->push(chunk);
            ASSERT_TRUE(out.has_value());
            streamed.samples.insert(streamed.samples.end(), out->samples.begin(),
                                    out->samples.end());
        }
        auto tail = (*stretcher)->finish();
        ASSERT_TRUE(tail.has_value());
        streamed.samples.insert(streamed.samples.end(), tail->samples.begin(), tail->samples.end());
        auto whole = time_stretch(input, speed);
        ASSERT_TRUE(whole.has_value());
        EXPECT_EQ(streamed.frames(), whole->frames()) << speed;
        EXPECT_NEAR(dominant_hz(streamed), 330.0, 330.0 * 0.02) << speed;
    }
}

TEST(TimeStretchTest, EmptyInputGivesNothing) {
    auto stretcher = TimeStretcher::create(2.0, 44100, 1);
    ASSERT_TRUE(stretcher.has_value());
    auto out = (*stretcher)->push(AudioBuffer{.sample_rate = 44100, .channels = 1});
    ASSERT_TRUE(out.has_value());
    EXPECT_TRUE(out->samples.empty());
    auto tail = (*stretcher)->finish();
    ASSERT_TRUE(tail.has_value());
    EXPECT_TRUE(tail->samples.empty());
}

TEST(TimeStretchTest, BadArgumentsAreErrors) {
    for (double speed : {0.0, 0.2, 4.01, -1.0, std::nan(""), double{INFINITY}}) {
        auto stretcher = TimeStretcher::create(speed, 44100, 1);
        ASSERT_FALSE(stretcher.has_value()) << speed;
        EXPECT_EQ(stretcher.error().code, ErrorCode::invalid_argument);
    }
    EXPECT_FALSE(TimeStretcher::create(2.0, 4000, 1).has_value());
    EXPECT_FALSE(TimeStretcher::create(2.0, 400000, 1).has_value());
    EXPECT_FALSE(TimeStretcher::create(2.0, 44100, 0).has_value());
    EXPECT_FALSE(TimeStretcher::create(2.0, 44100, kMaxChannels + 1).has_value());
    EXPECT_FALSE(time_stretch(AudioBuffer{.sample_rate = 0, .channels = 1}, 2.0).has_value());

    auto stretcher = TimeStretcher::create(2.0, 44100, 1);
    ASSERT_TRUE(stretcher.has_value());
    auto other_rate = (*stretcher)->push(sine(48000, 0.1));
    ASSERT_FALSE(other_rate.has_value());
    EXPECT_EQ(other_rate.error().code, ErrorCode::invalid_argument);
    EXPECT_FALSE((*stretcher)->push(sine(44100, 0.1, 440.0, 2)).has_value());
    ASSERT_TRUE((*stretcher)->push(sine(44100, 0.1)).has_value());
    ASSERT_TRUE((*stretcher)->finish().has_value());
    auto late = (*stretcher)->push(sine(44100, 0.1));
    ASSERT_FALSE(late.has_value());
    EXPECT_EQ(late.error().code, ErrorCode::failed_precondition);
    EXPECT_FALSE((*stretcher)->finish().has_value());
}

}  // namespace
}  // namespace omnirt::media

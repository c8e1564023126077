// The turn detector's streaming resampler (private to the layer): no time shift, the band kept,
// exact results for any split of the input.
#include "vad/stream_resampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace omnirt::vad {
namespace {

std::vector<float> tone(int rate, double frequency, std::size_t count) {
    std::vector<float> samples(count);
    for (std::size_t i = 0; i < count; ++i) {
        samples[i] =
            static_cast<float>(0.5 * std::sin(2 * std::numbers::pi * frequency * i / rate));
    }
    return samples;
}

TEST(StreamResampler, ToneKeepsItsTimeAndAmplitude) {
    for (int rate : {8000, 22050, 24000, 44100, 48000}) {
        for (double frequency : {440.0, 3000.0, 7000.0}) {
            if (frequency >= 0.45 * rate) continue;
            SCOPED_TRACE(std::to_string(rate) + " Hz, tone " + std::to_string(frequency));
            auto resampler = StreamResampler::create(rate, 16000);
            ASSERT_TRUE(resampler) << resampler.error().to_string();
            const std::size_t count = static_cast<std::size_t>(rate);  // 1 s
            std::vector<float> out;
            resampler->push(tone(rate, frequency, count), out);
            // Everything but the filter's right half (< 10 ms) is out.
            EXPECT_LE(out.size(), 16000u);
            EXPECT_GE(out.size(), 16000u - 160);
            // Output n is the input at time n / 16000 s: the same tone, not delayed. Skip the
            // first 10 ms (the stream starts with a step from silence).
            const auto expected = tone(16000, frequency, out.size());
            float worst = 0;
            for (std::size_t n = 160; n < out.size(); ++n) {
                worst = std::max(worst, std::abs(out[n] - expected[n]));
            }
            EXPECT_LT(worst, 2e-3f);
        }
    }
}

TEST(StreamResampler, AboveTheNewNyquistFrequencyIsRemoved) {
    auto resampler = StreamResampler::create(48000, 16000);
    ASSERT_TRUE(resampler);
    std::vector<float> out;
    resampler->push(tone(48000, 12000.0, 48000), out);  // would alias to 4 kHz
    float peak = 0;
    for (std::size_t n = 160; n < out.size(); ++n) peak = std::max(peak, std::abs(out[n]));
    EXPECT_LT(peak, 1e-3f);
}

TEST(StreamResampler, AnySplitGivesTheSameSamples) {
    for (int rate : {16000, 24000, 44100}) {
        SCOPED_TRACE(rate);
        const auto input = tone(rate, 1234.5, 30011);
        auto whole = StreamResampler::create(rate, 16000);
        ASSERT_TRUE(whole);
        std::vector<float> expected;
        whole->push(input, expected);
        for (std::size_t piece :
             {std::size_t{1}, std::size_t{3}, std::size_t{480}, std::size_t{4097}}) {
            auto split = StreamResampler::create(rate, 16000);
            ASSERT_TRUE(split);
            std::vector<float> out;
            for (std::size_t offset = 0; offset < input.size(); offset += piece) {
                split->push(std::span<const float>(input).subspan(
                                offset, std::min(piece, input.size() - offset)),
                            out);
            }
            EXPECT_EQ(out, expected) << "pieces of " << piece;
        }
        // reset() starts a new stream: the same output again.
        whole->reset();
        std::vector<float> again;
        whole->push(input, again);
        EXPECT_EQ(again, expected);
    }
}

TEST(StreamResampler, SameRateIsACopyAndEmptyIsNothing) {
    auto resampler = StreamResampler::create(16000, 16000);
    ASSERT_TRUE(resampler);
    const auto input = tone(16000, 100, 1000);
    std::vector<float> out;
    resampler->push({}, out);
    EXPECT_TRUE(out.empty());
    resampler->push(input, out);
    EXPECT_EQ(out, input);
}

TEST(StreamResampler, RejectsRatesItCannotServe) {
    for (int rate : {0, -1, 999, 384001, 44101}) {
        auto resampler = StreamResampler::create(rate, 16000);
        ASSERT_FALSE(resampler) << rate;
        EXPECT_EQ(resampler.error().code, ErrorCode::invalid_argument);
    }
}

}  // namespace
}  // namespace omnirt::vad

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "media/test_audio.h"

namespace omnirt::media {
namespace {

using testing::as_bytes;
using testing::best_correlation;
using testing::rms;
using testing::sine;

std::uint32_t u32_at(const std::string& data, std::size_t offset) {
    std::uint32_t value = 0;
    for (int i = 3; i >= 0; --i) value = value << 8 | static_cast<std::uint8_t>(data[offset + i]);
    return value;
}
std::uint16_t u16_at(const std::string& data, std::size_t offset) {
    return static_cast<std::uint16_t>(static_cast<std::uint8_t>(data[offset]) |
                                      static_cast<std::uint8_t>(data[offset + 1]) << 8);
}

TEST(EncodeAudio, PcmBytesAreExactS16le) {
    AudioBuffer buffer{.sample_rate = 16000,
                       .channels = 2,
                       .samples = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -3.0f,
                                   std::numeric_limits<float>::quiet_NaN(), -0.25f}};
    auto encoded = encode_audio(buffer, AudioFormat::pcm);
    ASSERT_TRUE(encoded.has_value()) << encoded.error().to_string();
    const std::int16_t expected[] = {0, 32767, -32767, 16384, 32767, -32767, 0, -8192};
    ASSERT_EQ(encoded->size(), sizeof(expected));
    for (std::size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(static_cast<std::int16_t>(u16_at(*encoded, i * 2)), expected[i]) << i;
    }
}

TEST(EncodeAudio, WavHeaderFields) {
    auto buffer = sine(22050, 0.1, 440.0, 2);
    auto encoded = encode_audio(buffer, AudioFormat::wav);
    ASSERT_TRUE(encoded.has_value()) << encoded.error().to_string();
    const std::uint32_t data_bytes = static_cast<std::uint32_t>(buffer.samples.size() * 2);
    ASSERT_EQ(encoded->size(), 44 + data_bytes);
    EXPECT_EQ(encoded->substr(0, 4), "RIFF");
    EXPECT_EQ(u32_at(*encoded, 4), 36 + data_bytes);
    EXPECT_EQ(encoded->substr(8, 8), "WAVEfmt ");
    EXPECT_EQ(u32_at(*encoded, 16), 16u);
    EXPECT_EQ(u16_at(*encoded, 20), 1);  // PCM
    EXPECT_EQ(u16_at(*encoded, 22), 2);  // channels
    EXPECT_EQ(u32_at(*encoded, 24), 22050u);
    EXPECT_EQ(u32_at(*encoded, 28), 22050u * 2 * 2);
    EXPECT_EQ(u16_at(*encoded, 32), 4);
    EXPECT_EQ(u16_at(*encoded, 34), 16);
    EXPECT_EQ(encoded->substr(36, 4), "data");
    EXPECT_EQ(u32_at(*encoded, 40), data_bytes);
    // The payload is the pcm encoding, byte for byte.
    auto pcm = encode_audio(buffer, AudioFormat::pcm);
    ASSERT_TRUE(pcm.has_value());
    EXPECT_EQ(encoded->substr(44), *pcm);
}

TEST(EncodeAudio, EmptyBufferEncodesInEveryFormat) {
    AudioBuffer empty{.sample_rate = 24000, .channels = 1, .samples = {}};
    for (AudioFormat format : {AudioFormat::wav, AudioFormat::pcm, AudioFormat::flac,
                               AudioFormat::opus, AudioFormat::mp3}) {
        if (!format_available(format)) continue;
        auto encoded = encode_audio(empty, format);
        EXPECT_TRUE(encoded.has_value())
            << to_string(format) << ": " << encoded.error().to_string();
    }
}

TEST(EncodeAudio, RejectsInvalidBuffers) {
    const AudioBuffer bad[] = {
        {.sample_rate = 0, .channels = 1, .samples = {0.0f}},
        {.sample_rate = -48000, .channels = 1, .samples = {0.0f}},
        {.sample_rate = 10'000'000, .channels = 1, .samples = {0.0f}},
        {.sample_rate = 48000, .channels = 0, .samples = {0.0f}},
        {.sample_rate = 48000, .channels = 100, .samples = {}},
        {.sample_rate = 48000, .channels = 2, .samples = {0.0f, 0.0f, 0.0f}},
    };
    for (const AudioBuffer& buffer : bad) {
        for (AudioFormat format : {AudioFormat::wav, AudioFormat::pcm, AudioFormat::flac,
                                   AudioFormat::opus, AudioFormat::mp3}) {
            auto encoded = encode_audio(buffer, format);
            ASSERT_FALSE(encoded.has_value()) << to_string(format);
            EXPECT_EQ(encoded.error().code, ErrorCode::invalid_argument);
        }
    }
}

TEST(EncodeAudio, Mp3RejectsMoreThanTwoChannels) {
    if (!format_available(AudioFormat::mp3)) GTEST_SKIP() << "libsndfile without MPEG";
    auto encoded = encode_audio(sine(24000, 0.1, 440.0, 3), AudioFormat::mp3);
    ASSERT_FALSE(encoded.has_value());
    EXPECT_EQ(encoded.error().code, ErrorCode::invalid_argument);
}

struct RoundTripCase {
    AudioFormat format;
    int rate;
    int channels;
    int expected_rate;         // the rate the decoded stream reports
    std::int64_t max_padding;  // frames a codec may add (or drop) at the ends
    double min_correlation;
    double max_rms_error;  // lossless formats only: after quantisation
};

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, SineSurvives) {
    const RoundTripCase& c = GetParam();
    if (!format_available(c.format)) GTEST_SKIP() << to_string(c.format) << " unavailable";
    const AudioBuffer input = sine(c.rate, 0.5, 440.0, c.channels);
    auto encoded = encode_audio(input, c.format);
    ASSERT_TRUE(encoded.has_value()) << encoded.error().to_string();
    ASSERT_FALSE(encoded->empty());
    auto decoded = decode_audio(as_bytes(*encoded));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_EQ(decoded->sample_rate, c.expected_rate);
    EXPECT_EQ(decoded->channels, c.channels);
    const std::int64_t expected_frames = resampled_frames(input.frames(), c.rate, c.expected_rate);
    EXPECT_LE(std::llabs(decoded->frames() - expected_frames), c.max_padding)
        << "decoded " << decoded->frames() << " frames, expected about " << expected_frames;
    // Compare channel 0 against the reference at the decoded rate.
    AudioBuffer reference = sine(c.expected_rate, 0.5, 440.0, c.channels);
    std::vector<float> want, got;
    for (std::int64_t f = 0; f < reference.frames(); ++f)
        want.push_back(reference.samples[f * c.channels]);
    for (std::int64_t f = 0; f < decoded->frames(); ++f)
        got.push_back(decoded->samples[f * c.channels]);
    const std::size_t max_lag = static_cast<std::size_t>(c.max_padding);
    EXPECT_GT(best_correlation(want, got, max_lag), c.min_correlation);
    EXPECT_NEAR(rms(got), rms(want), 0.1 * rms(want));
    if (c.max_rms_error > 0) {
        ASSERT_EQ(got.size(), want.size());
        std::vector<float> error(want.size());
        for (std::size_t i = 0; i < want.size(); ++i) error[i] = got[i] - want[i];
        EXPECT_LT(rms(error), c.max_rms_error);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, RoundTrip,
    ::testing::Values(RoundTripCase{AudioFormat::wav, 24000, 1, 24000, 0, 0.9999, 1e-4},
                      RoundTripCase{AudioFormat::wav, 44100, 2, 44100, 0, 0.9999, 1e-4},
                      RoundTripCase{AudioFormat::flac, 24000, 1, 24000, 0, 0.9999, 1e-4},
                      RoundTripCase{AudioFormat::flac, 48000, 2, 48000, 0, 0.9999, 1e-4},
                      RoundTripCase{AudioFormat::opus, 48000, 1, 48000, 2000, 0.95, 0},
                      RoundTripCase{AudioFormat::opus, 24000, 2, 24000, 2000, 0.95, 0},
                      // 22.05 kHz is no Opus rate: resampled to 48 kHz before encoding.
                      RoundTripCase{AudioFormat::opus, 22050, 1, 48000, 2000, 0.95, 0},
                      RoundTripCase{AudioFormat::mp3, 24000, 1, 24000, 3000, 0.95, 0},
                      RoundTripCase{AudioFormat::mp3, 44100, 2, 44100, 3000, 0.95, 0},
                      // 96 kHz is no MP3 rate: resampled to 48 kHz before encoding.
                      RoundTripCase{AudioFormat::mp3, 96000, 1, 48000, 3000, 0.95, 0}),
    [](const auto& info) {
        return std::string(to_string(info.param.format)) + "_" + std::to_string(info.param.rate) +
               "_" + std::to_string(info.param.channels) + "ch";
    });

}  // namespace
}  // namespace omnirt::media

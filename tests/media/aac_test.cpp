// AAC in ADTS (FFmpeg's native encoder), whole and streamed, checked by decoding the bytes back
// with FFmpeg's AAC decoder and its ADTS demuxer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "media/ffmpeg_audio.h"
#include "media/test_audio.h"

namespace omnirt::media {
namespace {

using testing::adts_frame_lengths;
using testing::as_bytes;
using testing::best_correlation;
using testing::decode_adts_frames;
using testing::probe_format;
using testing::rms;
using testing::sine;

constexpr std::int64_t kPriming = 1024;  // frames the native encoder puts before the audio
constexpr std::int64_t kAacFrame = 1024;

class AacTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!format_available(AudioFormat::aac)) GTEST_SKIP() << "no FFmpeg AAC encoder";
    }
};

// The decoded audio without the encoder's priming, as long as `frames` (the input's length).
std::vector<float> without_priming(const AudioBuffer& decoded, std::int64_t frames) {
    const auto channels = static_cast<std::size_t>(decoded.channels);
    const auto begin = static_cast<std::size_t>(kPriming) * channels;
    const std::size_t end =
        std::min(decoded.samples.size(), begin + static_cast<std::size_t>(frames) * channels);
    return {decoded.samples.begin() + static_cast<std::ptrdiff_t>(begin),
            decoded.samples.begin() + static_cast<std::ptrdiff_t>(end)};
}

TEST_F(AacTest, NamesAndContentType) {
    EXPECT_EQ(parse_audio_format("aac").value(), AudioFormat::aac);
    EXPECT_EQ(to_string(AudioFormat::aac), "aac");
    EXPECT_EQ(content_type(AudioFormat::aac), "audio/aac");
    EXPECT_TRUE(streams_incrementally(AudioFormat::aac));
}

struct RoundTripCase {
    int rate;
    int channels;
    int decoded_rate;
};

class AacRoundTrip : public AacTest, public ::testing::WithParamInterface<RoundTripCase> {};

TEST_P(AacRoundTrip, DecodesToTheSameSoundAtItsRate) {
    const auto [rate, channels, decoded_rate] = GetParam();
    const AudioBuffer buffer = sine(rate, 0.5, 440.0, channels);
    auto encoded = encode_audio(buffer, AudioFormat::aac);
    ASSERT_TRUE(encoded.has_value()) << encoded.error().to_string();
    EXPECT_EQ(probe_format(as_bytes(*encoded)).value(), "aac/aac");
    auto decoded = decode_adts_frames(as_bytes(*encoded));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_EQ(decoded->sample_rate, decoded_rate);
    EXPECT_EQ(decoded->channels, channels);
    // Priming first, then the audio, padded to whole AAC frames.
    const std::int64_t frames = resampled_frames(buffer.frames(), rate, decoded_rate);
    EXPECT_GE(decoded->frames(), kPriming + frames);
    EXPECT_LT(decoded->frames(), kPriming + frames + 2 * kAacFrame);
    // Priming is near silence (the codec leaks a trace of the first audio into it).
    EXPECT_LT(rms(std::span(decoded->samples).first(kPriming * channels / 2)), 0.01);
    const std::vector<float> audio = without_priming(*decoded, frames);
    EXPECT_NEAR(rms(audio), rms(buffer.samples), 0.05);
    if (decoded_rate == rate) {
        EXPECT_GT(best_correlation(buffer.samples, audio, 0), 0.95);
    }
}

INSTANTIATE_TEST_SUITE_P(Rates, AacRoundTrip,
                         ::testing::Values(RoundTripCase{44100, 1, 44100},
                                           RoundTripCase{24000, 2, 24000},
                                           RoundTripCase{16000, 1, 16000},
                                           RoundTripCase{22000, 1, 48000}));

// A stream of uneven chunks: every piece is whole ADTS frames (decodable as it arrives), bytes
// go out before the end, and the concatenation is byte for byte the whole-buffer encoding.
TEST_F(AacTest, StreamsWholeFramesEqualToTheWholeEncoding) {
    for (int rate : {44100, 22000}) {
        const AudioBuffer buffer = sine(rate, 0.6, 330.0, 1);
        auto encoder =
            AudioStreamEncoder::create({.format = AudioFormat::aac, .sample_rate = rate});
        ASSERT_TRUE(encoder.has_value());
        std::string streamed;
        std::size_t pieces_with_bytes = 0;
        const std::int64_t sizes[] = {1, 0, 77, 3000, 4096, 333, 9000};
        for (std::int64_t at = 0, i = 0; at < buffer.frames(); ++i) {
            const std::int64_t n = std::min(sizes[i % 7], buffer.frames() - at);
            AudioBuffer chunk{.sample_rate = rate, .channels = 1, .samples = {}};
            chunk.samples.assign(buffer.samples.begin() + at, buffer.samples.begin() + at + n);
            at += n;
            auto piece = encoder->push(chunk);
            ASSERT_TRUE(piece.has_value()) << piece.error().to_string();
            if (piece->empty()) continue;
            ++pieces_with_bytes;
            EXPECT_FALSE(adts_frame_lengths(as_bytes(*piece)).empty()) << rate << " piece " << i;
            auto alone = decode_adts_frames(as_bytes(*piece));
            ASSERT_TRUE(alone.has_value()) << alone.error().to_string();
            EXPECT_GT(alone->frames(), 0);
            streamed += *piece;
        }
        EXPECT_GE(pieces_with_bytes, 3u) << rate;
        auto tail = encoder->finish();
        ASSERT_TRUE(tail.has_value()) << tail.error().to_string();
        EXPECT_FALSE(tail->empty());
        streamed += *tail;
        EXPECT_EQ(streamed, encode_audio(buffer, AudioFormat::aac).value()) << rate;
        EXPECT_FALSE(encoder->push(buffer).has_value());
    }
}

TEST_F(AacTest, SilenceNanAndClippingStayInRange) {
    AudioBuffer buffer = sine(24000, 0.3, 440.0, 1, 0.0f);
    buffer.samples[10] = std::numeric_limits<float>::quiet_NaN();
    auto silent = encode_audio(buffer, AudioFormat::aac);
    ASSERT_TRUE(silent.has_value());
    auto decoded = decode_adts_frames(as_bytes(*silent));
    ASSERT_TRUE(decoded.has_value());
    EXPECT_LT(rms(decoded->samples), 1e-4);
    AudioBuffer loud = sine(24000, 0.3, 440.0, 1, 4.0f);  // clamped to -1..1
    auto clipped = decode_adts_frames(as_bytes(encode_audio(loud, AudioFormat::aac).value()));
    ASSERT_TRUE(clipped.has_value());
    const auto peak = std::ranges::max(clipped->samples, {}, [](float x) { return std::abs(x); });
    EXPECT_LT(std::abs(peak), 1.3f);
    EXPECT_GT(rms(clipped->samples), 0.5);
}

TEST_F(AacTest, RefusesWhatItCannotHold) {
    auto three = encode_audio(sine(24000, 0.1, 440.0, 3), AudioFormat::aac);
    ASSERT_FALSE(three.has_value());
    EXPECT_EQ(three.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(three.error().message.find("1 or 2 channels"), std::string::npos);
    EXPECT_FALSE(AudioStreamEncoder::create(
                     {.format = AudioFormat::aac, .sample_rate = 24000, .channels = 3})
                     .has_value());
    auto empty = encode_audio(AudioBuffer{.sample_rate = 24000, .channels = 1, .samples = {}},
                              AudioFormat::aac);
    ASSERT_TRUE(empty.has_value()) << empty.error().to_string();
    if (!empty->empty()) EXPECT_FALSE(adts_frame_lengths(as_bytes(*empty)).empty());
}

}  // namespace
}  // namespace omnirt::media

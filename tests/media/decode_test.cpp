#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "media/test_audio.h"

namespace omnirt::media {
namespace {

using testing::as_bytes;
using testing::sine;

std::string encoded(AudioFormat format, int rate = 24000, int channels = 1, double seconds = 0.5) {
    auto bytes = encode_audio(sine(rate, seconds, 440.0, channels), format);
    OMNI_CHECK(bytes.has_value(), "test encode failed");
    return *bytes;
}

void put_u32(std::string& data, std::size_t offset, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) data[offset + i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}
void put_u16(std::string& data, std::size_t offset, std::uint16_t value) {
    data[offset] = static_cast<char>(value & 0xFF);
    data[offset + 1] = static_cast<char>(value >> 8);
}

TEST(DecodeAudio, EmptyInputFails) {
    auto decoded = decode_audio({});
    ASSERT_FALSE(decoded.has_value());
    EXPECT_EQ(decoded.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(decoded.error().message.find("empty"), std::string::npos);
}

TEST(DecodeAudio, GarbageFailsClearly) {
    std::mt19937 random(1234);
    for (std::size_t size : {1u, 3u, 12u, 44u, 100u, 4096u, 100000u}) {
        std::string garbage(size, '\0');
        for (char& c : garbage) c = static_cast<char>(random());
        auto decoded = decode_audio(as_bytes(garbage));
        ASSERT_FALSE(decoded.has_value()) << size;
        EXPECT_EQ(decoded.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(decoded.error().message.find("not a readable audio file"), std::string::npos);
    }
    // Text that a client might send instead of audio.
    const std::string text = "{\"hello\": \"world\"}";
    EXPECT_FALSE(decode_audio(as_bytes(text)).has_value());
}

TEST(DecodeAudio, RawPcmWithoutHeaderIsRejected) {
    auto decoded = decode_audio(as_bytes(encoded(AudioFormat::pcm)));
    EXPECT_FALSE(decoded.has_value());
}

TEST(DecodeAudio, TruncatedFilesNeverCrash) {
    for (AudioFormat format :
         {AudioFormat::wav, AudioFormat::flac, AudioFormat::opus, AudioFormat::mp3}) {
        if (!format_available(format)) continue;
        const std::string whole = encoded(format);
        // Every cut inside the first 200 bytes (the headers), then coarser cuts.
        for (std::size_t cut = 0; cut < whole.size(); cut += cut < 200 ? 1 : 997) {
            auto decoded = decode_audio(as_bytes(whole.substr(0, cut)));
            if (decoded.has_value()) {
                EXPECT_LE(decoded->frames(), 12000 + 4000) << to_string(format) << " cut " << cut;
                EXPECT_TRUE(validate(*decoded).has_value());
            } else {
                EXPECT_FALSE(decoded.error().message.empty());
            }
        }
    }
}

TEST(DecodeAudio, TruncatedWavHeaderFails) {
    const std::string whole = encoded(AudioFormat::wav);
    for (std::size_t cut : {0u, 4u, 11u, 12u, 20u, 35u}) {
        EXPECT_FALSE(decode_audio(as_bytes(whole.substr(0, cut))).has_value()) << cut;
    }
}

TEST(DecodeAudio, WavClaimingTwoToThe31FramesDecodesOnlyWhatIsThere) {
    std::string wav = encoded(AudioFormat::wav, 16000, 1, 0.01);  // 160 frames
    put_u32(wav, 4, 0xFFFFFFFFu);
    put_u32(wav, 40, 0x80000000u * 2 - 2);  // 2^31 frames of 2 bytes (minus one)
    auto decoded = decode_audio(as_bytes(wav));
    if (decoded.has_value()) {
        EXPECT_EQ(decoded->frames(), 160);
        EXPECT_LE(decoded->samples.capacity(), wav.size());
    } else {
        EXPECT_NE(decoded.error().code, ErrorCode::internal);
    }
}

TEST(DecodeAudio, MaxDecodedSamplesBoundsTheOutput) {
    const std::string wav = encoded(AudioFormat::wav, 24000, 2, 0.5);  // 24000 samples
    auto at_limit = decode_audio(as_bytes(wav), {.max_decoded_samples = 24000});
    ASSERT_TRUE(at_limit.has_value()) << at_limit.error().to_string();
    EXPECT_EQ(at_limit->samples.size(), 24000u);
    for (AudioFormat format :
         {AudioFormat::wav, AudioFormat::flac, AudioFormat::opus, AudioFormat::mp3}) {
        if (!format_available(format)) continue;
        auto over =
            decode_audio(as_bytes(encoded(format, 24000, 2, 0.5)), {.max_decoded_samples = 10000});
        ASSERT_FALSE(over.has_value()) << to_string(format);
        EXPECT_EQ(over.error().code, ErrorCode::resource_exhausted);
        EXPECT_NE(over.error().message.find("10000"), std::string::npos);
    }
    EXPECT_FALSE(decode_audio(as_bytes(wav), {.max_decoded_samples = 0}).has_value());
}

TEST(DecodeAudio, HostileWavFieldsFail) {
    const std::string wav = encoded(AudioFormat::wav, 16000, 1, 0.01);
    std::string zero_rate = wav;
    put_u32(zero_rate, 24, 0);
    std::string many_channels = wav;
    put_u16(many_channels, 22, 1000);
    std::string zero_channels = wav;
    put_u16(zero_channels, 22, 0);
    std::string bad_bits = wav;
    put_u16(bad_bits, 34, 3);
    std::string huge_fmt = wav;
    put_u32(huge_fmt, 16, 0xFFFFFFF0u);
    for (const std::string* hostile :
         {&zero_rate, &many_channels, &zero_channels, &bad_bits, &huge_fmt}) {
        auto decoded = decode_audio(as_bytes(*hostile));
        if (decoded.has_value()) {
            EXPECT_TRUE(validate(*decoded).has_value());
        } else {
            EXPECT_NE(decoded.error().code, ErrorCode::internal) << decoded.error().to_string();
        }
    }
    auto rejected = decode_audio(as_bytes(many_channels));
    ASSERT_FALSE(rejected.has_value());
}

TEST(DecodeAudio, BitFlippedFilesNeverCrash) {
    std::mt19937 random(42);
    for (AudioFormat format :
         {AudioFormat::wav, AudioFormat::flac, AudioFormat::opus, AudioFormat::mp3}) {
        if (!format_available(format)) continue;
        const std::string whole = encoded(format, 24000, 1, 0.2);
        for (int round = 0; round < 50; ++round) {
            std::string damaged = whole;
            for (int flips = 0; flips < 8; ++flips) {
                const std::size_t at = random() % std::min<std::size_t>(damaged.size(), 512);
                damaged[at] = static_cast<char>(damaged[at] ^ (1 << (random() % 8)));
            }
            auto decoded = decode_audio(as_bytes(damaged), {.max_decoded_samples = 1 << 20});
            if (decoded.has_value()) {
                EXPECT_TRUE(validate(*decoded).has_value());
            }
        }
    }
}

}  // namespace
}  // namespace omnirt::media

namespace omnirt::media {
namespace {

// A float WAV (format 3) holding NaN and inf decodes with those samples as 0.
TEST(DecodeAudio, NonFiniteFloatSamplesBecomeSilence) {
    const float values[] = {0.25f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -0.5f};
    std::string wav = "RIFF";
    auto put32 = [&](std::uint32_t v) {
        for (int i = 0; i < 4; ++i) wav.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    };
    auto put16 = [&](std::uint16_t v) {
        wav.push_back(static_cast<char>(v & 0xFF));
        wav.push_back(static_cast<char>(v >> 8));
    };
    put32(36 + sizeof(values));
    wav += "WAVEfmt ";
    put32(16);
    put16(3);  // IEEE float
    put16(1);
    put32(8000);
    put32(8000 * 4);
    put16(4);
    put16(32);
    wav += "data";
    put32(sizeof(values));
    wav.append(reinterpret_cast<const char*>(values), sizeof(values));
    auto decoded = decode_audio(testing::as_bytes(wav));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    ASSERT_EQ(decoded->samples.size(), 4u);
    EXPECT_EQ(decoded->samples[0], 0.25f);
    EXPECT_EQ(decoded->samples[1], 0.0f);
    EXPECT_EQ(decoded->samples[2], 0.0f);
    EXPECT_EQ(decoded->samples[3], -0.5f);
}

}  // namespace
}  // namespace omnirt::media

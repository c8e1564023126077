#include <gtest/gtest.h>

#include "media/audio.h"

namespace omnirt::media {
namespace {

TEST(AudioFormat, ParsesEveryAcceptedName) {
    for (AudioFormat format : {AudioFormat::wav, AudioFormat::pcm, AudioFormat::flac,
                               AudioFormat::opus, AudioFormat::mp3, AudioFormat::aac}) {
        auto parsed = parse_audio_format(to_string(format));
        ASSERT_TRUE(parsed.has_value()) << to_string(format);
        EXPECT_EQ(*parsed, format);
    }
}

TEST(AudioFormat, UnknownNamesFailNamingTheAcceptedFormats) {
    for (std::string_view name : std::initializer_list<std::string_view>{
             "", "WAV", "m4a", "AAC", "ogg", "mp3 ", "opus;flac", std::string_view("wav\0x", 5)}) {
        auto parsed = parse_audio_format(name);
        ASSERT_FALSE(parsed.has_value()) << name;
        EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(parsed.error().message.find("wav, pcm, flac, opus, mp3, aac"), std::string::npos);
    }
}

TEST(AudioFormat, HugeUnknownNameIsTruncatedInTheMessage) {
    const std::string name(100000, 'x');
    auto parsed = parse_audio_format(name);
    ASSERT_FALSE(parsed.has_value());
    EXPECT_LT(parsed.error().message.size(), 200u);
}

TEST(AudioFormat, ContentTypes) {
    EXPECT_EQ(content_type(AudioFormat::wav), "audio/wav");
    EXPECT_EQ(content_type(AudioFormat::pcm), "audio/pcm");
    EXPECT_EQ(content_type(AudioFormat::flac), "audio/flac");
    EXPECT_EQ(content_type(AudioFormat::opus), "audio/ogg");
    EXPECT_EQ(content_type(AudioFormat::mp3), "audio/mpeg");
    EXPECT_EQ(content_type(AudioFormat::aac), "audio/aac");
}

TEST(AudioFormat, WavPcmFlacOpusAreAlwaysAvailableHere) {
    // Debian 12's libsndfile 1.2 is built with FLAC and Opus (scripts/setup.sh).
    EXPECT_TRUE(format_available(AudioFormat::wav));
    EXPECT_TRUE(format_available(AudioFormat::pcm));
    EXPECT_TRUE(format_available(AudioFormat::flac));
    EXPECT_TRUE(format_available(AudioFormat::opus));
}

TEST(AudioFormat, Mp3AndAacAvailabilityMatchesWhatEncodeDoes) {
    AudioBuffer buffer{.sample_rate = 24000, .channels = 1, .samples = std::vector<float>(2400)};
    for (AudioFormat format : {AudioFormat::mp3, AudioFormat::aac}) {
        auto encoded = encode_audio(buffer, format);
        if (format_available(format)) {
            EXPECT_TRUE(encoded.has_value()) << encoded.error().to_string();
        } else {
            ASSERT_FALSE(encoded.has_value());
            EXPECT_EQ(encoded.error().code, ErrorCode::unimplemented);
            EXPECT_NE(encoded.error().message.find(to_string(format)), std::string::npos);
        }
    }
}

TEST(AudioFormat, StreamingFormats) {
    EXPECT_TRUE(streams_incrementally(AudioFormat::wav));
    EXPECT_TRUE(streams_incrementally(AudioFormat::pcm));
    EXPECT_FALSE(streams_incrementally(AudioFormat::flac));
    EXPECT_FALSE(streams_incrementally(AudioFormat::opus));
    EXPECT_FALSE(streams_incrementally(AudioFormat::mp3));
}

}  // namespace
}  // namespace omnirt::media

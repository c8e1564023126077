#include <gtest/gtest.h>

#include "media/test_audio.h"

namespace omnirt::media {
namespace {

using testing::as_bytes;
using testing::best_correlation;
using testing::sine;

std::uint32_t u32_at(const std::string& data, std::size_t offset) {
    std::uint32_t value = 0;
    for (int i = 3; i >= 0; --i) value = value << 8 | static_cast<std::uint8_t>(data[offset + i]);
    return value;
}

// Splits `buffer` into chunks of uneven sizes (including an empty one).
std::vector<AudioBuffer> chunks_of(const AudioBuffer& buffer) {
    std::vector<AudioBuffer> chunks;
    const std::int64_t sizes[] = {1, 0, 77, 1000, 4096, 333};
    std::int64_t at = 0;
    for (std::size_t i = 0; at < buffer.frames(); ++i) {
        const std::int64_t n = std::min(sizes[i % 6], buffer.frames() - at);
        AudioBuffer chunk{
            .sample_rate = buffer.sample_rate, .channels = buffer.channels, .samples = {}};
        chunk.samples.assign(buffer.samples.begin() + at * buffer.channels,
                             buffer.samples.begin() + (at + n) * buffer.channels);
        chunks.push_back(std::move(chunk));
        at += n;
    }
    return chunks;
}

std::string stream_all(AudioStreamEncoder& encoder, const AudioBuffer& buffer,
                       std::vector<std::string>* pieces = nullptr) {
    std::string all;
    for (const AudioBuffer& chunk : chunks_of(buffer)) {
        auto bytes = encoder.push(chunk);
        EXPECT_TRUE(bytes.has_value()) << bytes.error().to_string();
        if (pieces) pieces->push_back(*bytes);
        all += *bytes;
    }
    auto tail = encoder.finish();
    EXPECT_TRUE(tail.has_value()) << tail.error().to_string();
    if (pieces) pieces->push_back(*tail);
    return all + *tail;
}

TEST(AudioStreamEncoder, PcmChunksPassThroughAsS16le) {
    const AudioBuffer buffer = sine(24000, 0.3, 440.0, 2);
    auto encoder = AudioStreamEncoder::create(
        {.format = AudioFormat::pcm, .sample_rate = 24000, .channels = 2});
    ASSERT_TRUE(encoder.has_value());
    std::vector<std::string> pieces;
    const std::string streamed = stream_all(*encoder, buffer, &pieces);
    EXPECT_EQ(streamed, *encode_audio(buffer, AudioFormat::pcm));
    const auto chunks = chunks_of(buffer);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        EXPECT_EQ(pieces[i].size(), chunks[i].samples.size() * 2) << i;  // nothing held back
    }
    EXPECT_TRUE(pieces.back().empty());
}

TEST(AudioStreamEncoder, WavStreamsAnUnknownLengthHeaderThenPcm) {
    const AudioBuffer buffer = sine(16000, 0.5, 440.0, 1);
    auto encoder = AudioStreamEncoder::create(
        {.format = AudioFormat::wav, .sample_rate = 16000, .channels = 1});
    ASSERT_TRUE(encoder.has_value());
    std::vector<std::string> pieces;
    const std::string streamed = stream_all(*encoder, buffer, &pieces);
    ASSERT_EQ(pieces[0].size(), 44u + 2);  // header with the first (1-frame) chunk
    EXPECT_EQ(streamed.substr(0, 4), "RIFF");
    EXPECT_EQ(u32_at(streamed, 4), 0xFFFFFFFFu);
    EXPECT_EQ(streamed.substr(36, 4), "data");
    EXPECT_EQ(u32_at(streamed, 40), 0xFFFFFFFFu);
    EXPECT_EQ(u32_at(streamed, 24), 16000u);
    EXPECT_EQ(streamed.substr(44), *encode_audio(buffer, AudioFormat::pcm));
    // Decodes as a whole: libsndfile clamps the unknown sizes to the bytes present.
    auto decoded = decode_audio(as_bytes(streamed));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_EQ(decoded->sample_rate, 16000);
    EXPECT_EQ(decoded->frames(), buffer.frames());
    EXPECT_GT(best_correlation(buffer.samples, decoded->samples, 0), 0.9999);
}

TEST(AudioStreamEncoder, WavWithNoChunksStillSendsAHeader) {
    auto encoder = AudioStreamEncoder::create(
        {.format = AudioFormat::wav, .sample_rate = 24000, .channels = 1});
    ASSERT_TRUE(encoder.has_value());
    auto tail = encoder->finish();
    ASSERT_TRUE(tail.has_value());
    EXPECT_EQ(tail->size(), 44u);
}

TEST(AudioStreamEncoder, BufferedFormatsProduceTheWholeFileAtFinish) {
    for (AudioFormat format : {AudioFormat::flac, AudioFormat::opus, AudioFormat::mp3}) {
        if (!format_available(format)) continue;
        const AudioBuffer buffer = sine(24000, 0.5, 440.0, 1);
        auto encoder =
            AudioStreamEncoder::create({.format = format, .sample_rate = 24000, .channels = 1});
        ASSERT_TRUE(encoder.has_value());
        std::vector<std::string> pieces;
        const std::string streamed = stream_all(*encoder, buffer, &pieces);
        for (std::size_t i = 0; i + 1 < pieces.size(); ++i) EXPECT_TRUE(pieces[i].empty());
        auto decoded = decode_audio(as_bytes(streamed));
        ASSERT_TRUE(decoded.has_value()) << to_string(format) << decoded.error().to_string();
        EXPECT_EQ(decoded->sample_rate, 24000);
        EXPECT_NEAR(decoded->frames(), buffer.frames(), 3000) << to_string(format);
    }
}

TEST(AudioStreamEncoder, BufferedFormatsAreBounded) {
    auto encoder = AudioStreamEncoder::create({.format = AudioFormat::flac,
                                               .sample_rate = 24000,
                                               .channels = 1,
                                               .max_buffered_samples = 1000});
    ASSERT_TRUE(encoder.has_value());
    ASSERT_TRUE(encoder->push(sine(24000, 1000.0 / 24000)).has_value());
    auto over = encoder->push(sine(24000, 1.0 / 24000));
    ASSERT_FALSE(over.has_value());
    EXPECT_EQ(over.error().code, ErrorCode::resource_exhausted);
}

TEST(AudioStreamEncoder, MisuseFails) {
    EXPECT_FALSE(
        AudioStreamEncoder::create({.format = AudioFormat::wav, .sample_rate = 0}).has_value());
    EXPECT_FALSE(
        AudioStreamEncoder::create({.format = AudioFormat::wav, .channels = 0}).has_value());
    EXPECT_FALSE(AudioStreamEncoder::create({.format = AudioFormat::pcm, .max_buffered_samples = 0})
                     .has_value());
    auto encoder = AudioStreamEncoder::create(
        {.format = AudioFormat::pcm, .sample_rate = 24000, .channels = 1});
    ASSERT_TRUE(encoder.has_value());
    auto wrong_rate = encoder->push(sine(16000, 0.01));
    ASSERT_FALSE(wrong_rate.has_value());
    EXPECT_EQ(wrong_rate.error().code, ErrorCode::invalid_argument);
    auto wrong_channels = encoder->push(sine(24000, 0.01, 440.0, 2));
    ASSERT_FALSE(wrong_channels.has_value());
    ASSERT_TRUE(encoder->finish().has_value());
    auto after = encoder->push(sine(24000, 0.01));
    ASSERT_FALSE(after.has_value());
    EXPECT_EQ(after.error().code, ErrorCode::failed_precondition);
    EXPECT_FALSE(encoder->finish().has_value());
}

}  // namespace
}  // namespace omnirt::media

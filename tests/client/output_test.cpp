// The client output protocol: chunks and results of any pipeline turned into text and audio,
// including wrong types from a stage (clear errors, never a crash).
#include "client/output.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "client/audio_output.h"
#include "client/client.h"

namespace omnirt::client {
namespace {

Tensor float_audio(const std::vector<float>& samples) { return Tensor::from_vector(samples); }

TEST(OutputChunk, TextAndAudioDeltas) {
    auto text = parse_chunk(Map{{"text", "hel"}, {"token", 3}});
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(text->text, "hel");
    EXPECT_FALSE(text->audio);

    auto audio = parse_chunk(Map{{"audio", float_audio({0.5f, -0.5f})}, {"sample_rate", 16000}});
    ASSERT_TRUE(audio.has_value());
    ASSERT_TRUE(audio->audio);
    EXPECT_EQ(audio->audio->sample_rate, 16000);
    EXPECT_EQ(audio->audio->samples, (std::vector<float>{0.5f, -0.5f}));

    // Chunks that are not maps, or maps without known keys, carry nothing for the client.
    for (const Value& other : {Value(), Value(7), Value(Map{{"token", 1}})}) {
        auto delta = parse_chunk(other);
        ASSERT_TRUE(delta.has_value());
        EXPECT_TRUE(delta->empty());
    }
}

TEST(OutputChunk, WrongTypesNameTheKey) {
    struct Case {
        Value chunk;
        const char* key;
    };
    std::vector<Case> cases = {
        {Map{{"text", 5}}, "'text'"},
        {Map{{"audio", "not a tensor"}, {"sample_rate", 24000}}, "'audio'"},
        {Map{{"audio", float_audio({0.f})}}, "'sample_rate'"},
        {Map{{"audio", float_audio({0.f})}, {"sample_rate", -1}}, "'sample_rate'"},
        {Map{{"audio", float_audio({0.f})}, {"sample_rate", 1.5}}, "'sample_rate'"},
        {Map{{"audio", float_audio({0.f})}, {"sample_rate", std::int64_t{1} << 40}},
         "'sample_rate'"},
    };
    for (const auto& c : cases) {
        auto delta = parse_chunk(c.chunk);
        ASSERT_FALSE(delta.has_value()) << c.key;
        EXPECT_EQ(delta.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(delta.error().message.find(c.key), std::string::npos) << delta.error().message;
    }
    auto bad_dtype = Tensor::from_vector(std::vector<std::int64_t>{1, 2});
    EXPECT_FALSE(parse_chunk(Map{{"audio", bad_dtype}, {"sample_rate", 24000}}).has_value());
}

Value entry(const char* token, double logprob, List top = {}) {
    Map out{{"token", token}, {"logprob", logprob}, {"bytes", List{Value(104), Value(105)}}};
    if (!top.empty()) out.emplace("top_logprobs", Value(std::move(top)));
    return Value(std::move(out));
}

TEST(OutputChunk, LogprobEntries) {
    auto delta = parse_chunk(
        Map{{"text", "hi"},
            {"logprobs", List{entry("hi", -0.25, List{entry("hi", -0.25), entry("ho", -2.0)})}}});
    ASSERT_TRUE(delta.has_value()) << delta.error().to_string();
    ASSERT_EQ(delta->logprobs.size(), 1u);
    const TokenLogprob& got = delta->logprobs[0];
    EXPECT_EQ(got.token, "hi");
    EXPECT_DOUBLE_EQ(got.logprob, -0.25);
    EXPECT_EQ(got.bytes, (std::vector<std::uint8_t>{104, 105}));
    ASSERT_EQ(got.top.size(), 2u);
    EXPECT_EQ(got.top[1].token, "ho");
    EXPECT_DOUBLE_EQ(got.top[1].logprob, -2.0);
    // A chunk with only log probabilities is not empty (a token that adds no text yet).
    auto only = parse_chunk(Map{{"logprobs", List{entry("\xe4", -1.0)}}});
    ASSERT_TRUE(only.has_value());
    EXPECT_FALSE(only->empty());

    auto result = parse_result(Map{{"text", "hi"}, {"logprobs", List{entry("hi", -0.5)}}});
    ASSERT_TRUE(result.has_value());
    ASSERT_TRUE(result->logprobs);
    EXPECT_EQ(result->logprobs->size(), 1u);
    auto without = parse_result(Map{{"text", "hi"}});
    ASSERT_TRUE(without.has_value());
    EXPECT_FALSE(without->logprobs);
}

TEST(OutputChunk, MalformedLogprobsNameTheField) {
    struct Case {
        Value logprobs;
        const char* field;
    };
    std::vector<Case> cases = {
        {Value("x"), "'logprobs'"},
        {List{Value(3)}, "'logprobs[0]'"},
        {List{Value(Map{{"logprob", -1.0}})}, "'logprobs[0].token'"},
        {List{Value(Map{{"token", "a"}})}, "'logprobs[0].logprob'"},
        {List{Value(Map{{"token", "a"}, {"logprob", 0.5}})}, "'logprobs[0].logprob'"},
        {List{Value(Map{{"token", "a"}, {"logprob", -1.0}, {"bytes", List{Value(256)}}})},
         "'logprobs[0].bytes'"},
        {List{Value(Map{{"token", "a"}, {"logprob", -1.0}, {"bytes", "ab"}})},
         "'logprobs[0].bytes'"},
        {List{Value(Map{{"token", "a"}, {"logprob", -1.0}, {"top_logprobs", 1}})},
         "'logprobs[0].top_logprobs'"},
        {List{entry("a", -1.0, List{entry("b", -1.0, List{entry("c", -1.0)})})},
         "'logprobs[0].top_logprobs[0].top_logprobs'"},
    };
    List many;
    for (int i = 0; i < 65; ++i) many.push_back(entry("t", -1.0));
    cases.push_back({List{entry("a", -1.0, std::move(many))}, "'logprobs[0].top_logprobs'"});
    for (const auto& c : cases) {
        auto delta = parse_chunk(Map{{"logprobs", c.logprobs}});
        ASSERT_FALSE(delta.has_value()) << c.field;
        EXPECT_EQ(delta.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(delta.error().message.find(c.field), std::string::npos) << delta.error().message;
        EXPECT_FALSE(parse_result(Map{{"text", "t"}, {"logprobs", c.logprobs}}).has_value());
    }
}

TEST(OutputResult, OneTerminalStage) {
    auto out = parse_result(Map{{"text", "hi."},
                                {"finish_reason", "length"},
                                {"usage", Map{{"prompt_tokens", 3}, {"completion_tokens", 2}}}});
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->text, "hi.");
    EXPECT_EQ(out->finish_reason, "length");
    EXPECT_EQ(out->usage.prompt_tokens, 3);
    EXPECT_EQ(out->usage.completion_tokens, 2);
    EXPECT_FALSE(out->audio);
}

TEST(OutputResult, MergedTerminalStagesCombineInNameOrder) {
    auto out =
        parse_result(Map{{"decode", Map{{"text", "a"}, {"usage", Map{{"completion_tokens", 4}}}}},
                         {"talker", Map{{"audio", float_audio({0.25f})},
                                        {"sample_rate", 24000},
                                        {"transcript", "a"},
                                        {"usage", Map{{"completion_tokens", 6}}}}},
                         {"ignored", 12}});
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->text, "a");
    ASSERT_TRUE(out->audio);
    EXPECT_EQ(out->audio->samples.size(), 1u);
    EXPECT_EQ(out->transcript, "a");
    EXPECT_EQ(out->usage.completion_tokens, 10);

    auto bad = parse_result(Map{{"talker", Map{{"usage", Map{{"prompt_tokens", -1}}}}}});
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().message.find("stage 'talker'"), std::string::npos);
    EXPECT_NE(bad.error().message.find("usage.prompt_tokens"), std::string::npos);
    EXPECT_FALSE(parse_result(Map{{"usage", "many"}}).has_value());
}

// usage.engine_time_s (an AR stage's seconds on the request): absent unless a stage reports
// it; the largest of several terminal stages (they run at the same time); anything but a finite
// number >= 0 is an error naming it.
TEST(OutputResult, EngineTimeIsTheLargestReported) {
    auto none = parse_result(Map{{"usage", Map{{"completion_tokens", 2}}}});
    ASSERT_TRUE(none.has_value());
    EXPECT_FALSE(none->usage.engine_seconds.has_value());

    auto one = parse_result(Map{{"usage", Map{{"completion_tokens", 2}, {"engine_time_s", 1.5}}}});
    ASSERT_TRUE(one.has_value());
    ASSERT_TRUE(one->usage.engine_seconds.has_value());
    EXPECT_DOUBLE_EQ(*one->usage.engine_seconds, 1.5);

    auto merged = parse_result(
        Map{{"decode", Map{{"usage", Map{{"completion_tokens", 4}, {"engine_time_s", 2.25}}}}},
            {"talker", Map{{"usage", Map{{"completion_tokens", 6}, {"engine_time_s", 3}}}}},
            {"vocoder", Map{{"usage", Map{{"completion_tokens", 1}}}}}});
    ASSERT_TRUE(merged.has_value());
    ASSERT_TRUE(merged->usage.engine_seconds.has_value());
    EXPECT_DOUBLE_EQ(*merged->usage.engine_seconds, 3.0);
    EXPECT_EQ(merged->usage.completion_tokens, 11);

    for (const Value& bad : {Value(-0.5), Value("1.5"), Value(std::nan("")),
                             Value(std::numeric_limits<double>::infinity()), Value(List{})}) {
        auto out = parse_result(Map{{"usage", Map{{"engine_time_s", bad}}}});
        ASSERT_FALSE(out.has_value()) << bad.debug_string();
        EXPECT_NE(out.error().message.find("usage.engine_time_s"), std::string::npos)
            << out.error().message;
    }
}

TEST(OutputResult, NoTextIsAbsentNotEmpty) {
    auto out = parse_result(Value());
    ASSERT_TRUE(out.has_value());
    EXPECT_FALSE(out->text);
    auto audio_only = parse_result(Map{{"audio", float_audio({0.f})}, {"sample_rate", 8000}});
    ASSERT_TRUE(audio_only.has_value());
    EXPECT_FALSE(audio_only->text);
}

TEST(AudioResponseEncoder, WavStreamsAHeaderThenSamplesAndResamplesLaterRates) {
    AudioResponseEncoder encoder(media::AudioFormat::wav);
    EXPECT_FALSE(encoder.started());
    media::AudioBuffer first{.sample_rate = 24000, .channels = 1, .samples = {0.1f, 0.2f}};
    auto head = encoder.push(first);
    ASSERT_TRUE(head.has_value());
    EXPECT_EQ(head->size(), 44u + 4u);
    EXPECT_EQ(head->substr(0, 4), "RIFF");
    media::AudioBuffer other_rate{
        .sample_rate = 48000, .channels = 1, .samples = std::vector<float>(480, 0.f)};
    auto more = encoder.push(other_rate);
    ASSERT_TRUE(more.has_value());
    EXPECT_EQ(more->size(), 240u * 2);  // resampled to 24 kHz, PCM16
    media::AudioBuffer stereo{.sample_rate = 24000, .channels = 2, .samples = {0.f, 0.f}};
    auto refused = encoder.push(stereo);
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().message.find("channel"), std::string::npos);
    EXPECT_DOUBLE_EQ(encoder.seconds_pushed(), 2.0 / 24000 + 480.0 / 48000 + 2.0 / 48000);
    auto tail = encoder.finish();
    ASSERT_TRUE(tail.has_value());
    EXPECT_TRUE(tail->empty());
}

TEST(AudioResponseEncoder, WholeFileFormatsComeOutAtTheEndAndNothingWithoutAudio) {
    AudioResponseEncoder flac(media::AudioFormat::flac);
    media::AudioBuffer tone{
        .sample_rate = 24000, .channels = 1, .samples = std::vector<float>(2400, 0.25f)};
    auto pushed = flac.push(tone);
    ASSERT_TRUE(pushed.has_value());
    EXPECT_TRUE(pushed->empty());
    auto file = flac.finish();
    ASSERT_TRUE(file.has_value());
    EXPECT_EQ(file->substr(0, 4), "fLaC");

    AudioResponseEncoder silent(media::AudioFormat::wav);
    auto nothing = silent.finish();
    ASSERT_TRUE(nothing.has_value());
    EXPECT_TRUE(nothing->empty());
}

TEST(ResponseAudioFormat, ChatNamesMapOntoMediaFormats) {
    EXPECT_EQ(response_audio_format("pcm16").value(), media::AudioFormat::pcm);
    EXPECT_EQ(response_audio_format("opus").value(), media::AudioFormat::opus);
    EXPECT_EQ(response_audio_format("aac").value(), media::AudioFormat::aac);
    EXPECT_FALSE(response_audio_format("m4a").has_value());
    EXPECT_FALSE(response_audio_format("WAV").has_value());
}

}  // namespace
}  // namespace omnirt::client

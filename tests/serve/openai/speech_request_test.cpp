#include "serve/openai/speech_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

Json minimal() { return Json{{"model", "tts"}, {"input", "Hello."}}; }

Json with(std::string_view key, Json value) {
    Json body = minimal();
    body[std::string(key)] = std::move(value);
    return body;
}

ProtocolResult<SpeechRequest> parse(const Json& body, RequestLimits limits = {}) {
    return parse_speech_request(body.dump(), limits);
}

void expect_error(const Json& body, const std::string& param, const std::string& fragment = "") {
    auto result = parse(body);
    ASSERT_FALSE(result.has_value()) << body.dump();
    EXPECT_EQ(result.error().http_status, 400);
    EXPECT_EQ(result.error().param, param) << result.error().message;
    EXPECT_NE(result.error().message.find(fragment), std::string::npos) << result.error().message;
}

TEST(SpeechRequest, Defaults) {
    auto request = parse(minimal());
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->model, "tts");
    EXPECT_EQ(request->input, "Hello.");
    EXPECT_EQ(request->voice, "");
    EXPECT_EQ(request->response_format, "wav");
    EXPECT_EQ(request->speed, 1.0);
    EXPECT_FALSE(request->stream);
}

TEST(SpeechRequest, EveryField) {
    Json body = minimal();
    body["voice"] = "alloy";
    body["instructions"] = "cheerful";
    body["response_format"] = "flac";
    body["speed"] = 0.25;
    body["stream"] = true;
    body["temperature"] = 0.8;
    body["top_k"] = 50;
    body["repetition_penalty"] = 1.05;
    body["seed"] = 3;
    body["max_tokens"] = 2048;
    body["stage_sampling"] = {{"talker", {{"top_p", 0.9}}}};
    body["stage_params"] = {{"code2wav", {{"chunk", 10}}}};
    body["unknown_field"] = {1, 2, 3};
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->voice, "alloy");
    EXPECT_EQ(request->instructions, "cheerful");
    EXPECT_EQ(request->response_format, "flac");
    EXPECT_EQ(request->speed, 0.25);
    EXPECT_TRUE(request->stream);
    EXPECT_EQ(request->sampling.temperature, 0.8);
    EXPECT_EQ(request->sampling.top_k, 50);
    EXPECT_EQ(request->sampling.seed, 3);
    EXPECT_EQ(request->max_tokens, 2048);
    EXPECT_EQ(request->stage_sampling.at("talker").top_p, 0.9);

    const OmniRequest omni = to_omni_request(*request);
    EXPECT_EQ(omni.inputs, Value(Map{{"text", Value("Hello.")},
                                     {"voice", Value("alloy")},
                                     {"instructions", Value("cheerful")},
                                     {"response_format", Value("flac")},
                                     {"speed", Value(0.25)}}));
    EXPECT_EQ(
        omni.params,
        Value(Map{{"sampling", Value(Map{{"temperature", Value(0.8)},
                                         {"top_k", Value(50)},
                                         {"repetition_penalty", Value(1.05)},
                                         {"seed", Value(3)}})},
                  {"stage_sampling", Value(Map{{"talker", Value(Map{{"top_p", Value(0.9)}})}})},
                  {"stage_params", Value(Map{{"code2wav", Value(Map{{"chunk", Value(10)}})}})},
                  {"max_tokens", Value(2048)},
                  {"seed", Value(3)},
                  {"stream", Value(true)}}))
        << omni.params.debug_string();
    EXPECT_EQ(omni.metadata, Value(Map{{"api", Value("audio.speech")}, {"model", Value("tts")}}));
}

TEST(SpeechRequest, EveryResponseFormat) {
    for (const auto& [format, type] : {std::pair{"wav", "audio/wav"},
                                       {"pcm", "audio/pcm"},
                                       {"flac", "audio/flac"},
                                       {"opus", "audio/ogg"},
                                       {"mp3", "audio/mpeg"},
                                       {"aac", "audio/aac"}}) {
        auto request = parse(with("response_format", format));
        ASSERT_TRUE(request.has_value()) << format;
        EXPECT_EQ(request->response_format, format);
        EXPECT_EQ(speech_content_type(format), type);
    }
    EXPECT_EQ(speech_content_type("m4a"), "application/octet-stream");
    expect_error(with("response_format", "m4a"), "response_format", "m4a");
    expect_error(with("response_format", "AAC"), "response_format", "AAC");
    expect_error(with("response_format", "WAV"), "response_format");
    expect_error(with("response_format", ""), "response_format");
    expect_error(with("response_format", 1), "response_format", "a string");
}

// SGLang-Omni's name for max_tokens; max_tokens wins when both are given.
TEST(SpeechRequest, MaxNewTokensIsMaxTokens) {
    auto alias = parse(with("max_new_tokens", 7));
    ASSERT_TRUE(alias.has_value()) << alias.error().message;
    EXPECT_EQ(alias->max_tokens, 7);
    Json both = minimal();
    both["max_tokens"] = 3;
    both["max_new_tokens"] = 7;
    auto preferred = parse(both);
    ASSERT_TRUE(preferred.has_value()) << preferred.error().message;
    EXPECT_EQ(preferred->max_tokens, 3);
}

TEST(SpeechRequest, StreamFormat) {
    auto sse = parse(with("stream_format", "sse"));
    ASSERT_TRUE(sse.has_value());
    EXPECT_TRUE(sse->stream);
    auto audio = parse(with("stream_format", "audio"));
    ASSERT_TRUE(audio.has_value());
    EXPECT_FALSE(audio->stream);
    EXPECT_TRUE(audio->stream_audio);
    EXPECT_FALSE(sse->stream_audio);
    // The pipeline streams for both; stream_format "audio" wins over stream: true.
    EXPECT_EQ(*to_omni_request(*audio).params.find("stream"), Value(true));
    Json body = with("stream_format", "audio");
    body["stream"] = true;
    auto both = parse(body);
    ASSERT_TRUE(both.has_value());
    EXPECT_TRUE(both->stream_audio);
    EXPECT_FALSE(both->stream);
    auto plain = parse(with("stream", false));
    ASSERT_TRUE(plain.has_value());
    EXPECT_FALSE(plain->stream_audio);
    EXPECT_EQ(*to_omni_request(*plain).params.find("stream"), Value(false));
    expect_error(with("stream_format", "json"), "stream_format");
}

TEST(SpeechRequest, Errors) {
    Json no_input = minimal();
    no_input.erase("input");
    expect_error(no_input, "input", "required");
    expect_error(with("input", ""), "input", "empty");
    expect_error(with("input", 5), "input", "a string");
    Json no_model = minimal();
    no_model.erase("model");
    expect_error(no_model, "model", "required");
    expect_error(with("speed", 0.2), "speed", "[0.25, 4.0]");
    expect_error(with("speed", 4.5), "speed");
    expect_error(with("speed", "fast"), "speed", "a number");
    expect_error(with("voice", Json::object()), "voice", "a string");
    expect_error(with("stream", "yes"), "stream");
    expect_error(with("temperature", 3), "temperature");
    expect_error(with("max_tokens", 0), "max_tokens");
    expect_error(with("max_new_tokens", 0), "max_new_tokens");
    expect_error(with("max_new_tokens", "many"), "max_new_tokens");
    expect_error(with("stage_sampling", {{"t", {{"top_p", 0}}}}), "stage_sampling.t.top_p");
    EXPECT_TRUE(parse(with("speed", 4.0)).has_value());
}

TEST(SpeechRequest, InputLengthInCodePoints) {
    RequestLimits limits;
    limits.max_speech_input_chars = 3;
    // Three 3-byte code points fit; four do not.
    EXPECT_TRUE(parse(with("input", "\u4f60\u597d\u5417"), limits).has_value());
    auto long_input = parse(with("input", "\u4f60\u597d\u5417\u5417"), limits);
    ASSERT_FALSE(long_input.has_value());
    EXPECT_EQ(long_input.error().param, "input");
    auto long_ascii = parse(with("input", std::string(13, 'a')), limits);
    ASSERT_FALSE(long_ascii.has_value());
    EXPECT_EQ(long_ascii.error().param, "input");
}

TEST(SpeechRequest, HostileBodies) {
    for (const std::string_view body :
         {std::string_view(""), std::string_view("{"), std::string_view("[]"),
          std::string_view("{\"model\":\"m\",\"input\":\"\xc3\x28\"}"),
          std::string_view("{\"model\":\"m\",\"input\":\"x\",\"speed\":1e999}")}) {
        auto result = parse_speech_request(body, RequestLimits{});
        ASSERT_FALSE(result.has_value()) << body;
        EXPECT_EQ(result.error().http_status, 400);
    }
}

}  // namespace
}  // namespace omnirt::serve::openai

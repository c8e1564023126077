#include "serve/openai/chat_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

Json minimal() {
    return Json{{"model", "m"}, {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

ProtocolResult<ChatRequest> parse(const Json& body, RequestLimits limits = {},
                                  MediaPolicy media = {}) {
    return parse_chat_request(body.dump(), limits, media);
}

// Expects a 400 naming `param` whose message contains `fragment`.
void expect_error(const Json& body, const std::string& param, const std::string& fragment = "",
                  int status = 400) {
    auto result = parse(body);
    ASSERT_FALSE(result.has_value()) << body.dump();
    EXPECT_EQ(result.error().http_status, status) << body.dump();
    EXPECT_EQ(result.error().param, param) << result.error().message;
    EXPECT_EQ(result.error().type, "invalid_request_error");
    EXPECT_NE(result.error().message.find(fragment), std::string::npos) << result.error().message;
}

Json with(std::string_view key, Json value) {
    Json body = minimal();
    body[std::string(key)] = std::move(value);
    return body;
}

TEST(ChatRequest, MinimalDefaults) {
    auto request = parse(minimal());
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->model, "m");
    ASSERT_EQ(request->messages.size(), 1u);
    EXPECT_EQ(request->messages[0].role, "user");
    ASSERT_EQ(request->messages[0].content.size(), 1u);
    EXPECT_EQ(request->messages[0].content[0].type, ContentPartType::text);
    EXPECT_EQ(request->messages[0].content[0].text, "hi");
    EXPECT_EQ(request->modalities, std::vector<std::string>{"text"});
    EXPECT_FALSE(request->wants_audio());
    EXPECT_EQ(request->sampling, SamplingParams{});
    EXPECT_FALSE(request->max_tokens);
    EXPECT_TRUE(request->stop.empty());
    EXPECT_FALSE(request->stream);
    EXPECT_FALSE(request->include_usage);
    EXPECT_EQ(request->audio_format, "wav");
}

TEST(ChatRequest, EveryField) {
    Json body = minimal();
    body["messages"] = Json::array({
        {{"role", "system"}, {"content", "be brief"}},
        {{"role", "developer"}, {"content", "dev"}},
        {{"role", "user"},
         {"name", "ann"},
         {"content",
          Json::array({
              {{"type", "text"}, {"text", "look"}},
              {{"type", "image_url"},
               {"image_url", {{"url", "data:image/png;base64,aGk="}, {"detail", "low"}}}},
              {{"type", "input_audio"}, {"input_audio", {{"data", "aGk="}, {"format", "wav"}}}},
              {{"type", "video_url"}, {"video_url", {{"url", "data:video/mp4;base64,aGk="}}}},
          })}},
        {{"role", "assistant"}, {"content", nullptr}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "42"}},
    });
    body["modalities"] = {"text", "audio"};
    body["audio"] = {{"voice", "alloy"}, {"format", "pcm16"}};
    body["temperature"] = 0.5;
    body["top_p"] = 1;
    body["top_k"] = 20;
    body["min_p"] = 0.05;
    body["presence_penalty"] = -2;
    body["frequency_penalty"] = 2;
    body["repetition_penalty"] = 1.1;
    body["max_completion_tokens"] = 64;
    body["stop"] = {"a", "b"};
    body["seed"] = -5;
    body["n"] = 1;
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    body["stage_sampling"] = {{"talker", {{"temperature", 0.9}, {"top_k", 5}}}};
    body["stage_params"] = {{"code2wav", {{"chunk", 25}, {"nested", {{"a", {1, 2}}}}}}};
    body["logprobs"] = false;
    body["user"] = "u-1";
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    ASSERT_EQ(request->messages.size(), 5u);
    EXPECT_EQ(request->messages[1].role, "developer");
    const auto& user = request->messages[2];
    EXPECT_EQ(user.name, "ann");
    ASSERT_EQ(user.content.size(), 4u);
    EXPECT_EQ(user.content[1].type, ContentPartType::image);
    EXPECT_EQ(user.content[1].detail, "low");
    EXPECT_EQ(user.content[1].media.mime, "image/png");
    EXPECT_EQ(user.content[2].type, ContentPartType::audio);
    EXPECT_EQ(user.content[2].media.mime, "audio/wav");
    EXPECT_EQ(user.content[3].type, ContentPartType::video);
    EXPECT_TRUE(request->messages[3].content.empty());
    EXPECT_EQ(request->messages[4].tool_call_id, "call_1");
    EXPECT_TRUE(request->wants_audio());
    EXPECT_EQ(request->audio_voice, "alloy");
    EXPECT_EQ(request->audio_format, "pcm16");
    EXPECT_EQ(request->sampling.temperature, 0.5);
    EXPECT_EQ(request->sampling.top_p, 1.0);
    EXPECT_EQ(request->sampling.top_k, 20);
    EXPECT_EQ(request->sampling.min_p, 0.05);
    EXPECT_EQ(request->sampling.presence_penalty, -2.0);
    EXPECT_EQ(request->sampling.frequency_penalty, 2.0);
    EXPECT_EQ(request->sampling.repetition_penalty, 1.1);
    EXPECT_EQ(request->sampling.seed, -5);
    EXPECT_EQ(request->max_tokens, 64);
    EXPECT_EQ(request->stop, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(request->stream);
    EXPECT_TRUE(request->include_usage);
    ASSERT_EQ(request->stage_sampling.count("talker"), 1u);
    EXPECT_EQ(request->stage_sampling.at("talker").temperature, 0.9);
    EXPECT_EQ(request->stage_sampling.at("talker").top_k, 5);
    ASSERT_EQ(request->stage_params.count("code2wav"), 1u);
    EXPECT_EQ(*request->stage_params.at("code2wav").find("chunk"), Value(25));
}

TEST(ChatRequest, NullsAreAbsent) {
    Json body = minimal();
    for (const char* key :
         {"temperature", "top_p", "top_k", "stop", "seed", "n", "stream", "stream_options",
          "modalities", "audio", "max_tokens", "stage_sampling", "stage_params"}) {
        body[key] = nullptr;
    }
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->sampling, SamplingParams{});
}

TEST(ChatRequest, StopAsString) {
    auto request = parse(with("stop", "END"));
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(request->stop, std::vector<std::string>{"END"});
}

TEST(ChatRequest, MaxTokensForms) {
    auto legacy = parse(with("max_tokens", 7));
    ASSERT_TRUE(legacy.has_value());
    EXPECT_EQ(legacy->max_tokens, 7);
    Json both = with("max_tokens", 7);
    both["max_completion_tokens"] = 7;
    EXPECT_TRUE(parse(both).has_value());
    both["max_completion_tokens"] = 8;
    expect_error(both, "max_tokens", "disagree");
    expect_error(with("max_tokens", 0), "max_tokens", "[1,");
    expect_error(with("max_completion_tokens", -1), "max_completion_tokens");
    expect_error(with("max_tokens", 1 << 21), "max_tokens");
    expect_error(with("max_tokens", 1.5), "max_tokens", "an integer");
}

TEST(ChatRequest, RangeChecks) {
    expect_error(with("temperature", 2.0001), "temperature", "[0, 2]");
    expect_error(with("temperature", -0.1), "temperature");
    EXPECT_TRUE(parse(with("temperature", 0)).has_value());
    EXPECT_TRUE(parse(with("temperature", 2)).has_value());
    expect_error(with("top_p", 0), "top_p", "(0");
    expect_error(with("top_p", 1.01), "top_p");
    expect_error(with("top_k", -2), "top_k");
    EXPECT_TRUE(parse(with("top_k", -1)).has_value());
    EXPECT_TRUE(parse(with("top_k", 0)).has_value());
    expect_error(with("min_p", 1.5), "min_p");
    expect_error(with("presence_penalty", 2.5), "presence_penalty");
    expect_error(with("frequency_penalty", -3), "frequency_penalty");
    expect_error(with("repetition_penalty", 0), "repetition_penalty");
    expect_error(with("n", 2), "n", "must be 1");
    expect_error(with("n", 0), "n", "must be 1");
}

TEST(ChatRequest, WrongTypes) {
    expect_error(with("model", 5), "model", "a string");
    expect_error(with("temperature", "0.5"), "temperature", "a number");
    expect_error(with("temperature", true), "temperature");
    expect_error(with("top_k", 1.5), "top_k", "an integer");
    expect_error(with("seed", "1"), "seed");
    expect_error(with("stream", 1), "stream", "a boolean");
    expect_error(with("stream", "true"), "stream");
    expect_error(with("stop", 5), "stop");
    expect_error(with("stop", Json::array({"a", 1})), "stop[1]");
    expect_error(with("modalities", "text"), "modalities");
    expect_error(with("modalities", Json::array({"text", "image"})), "modalities[1]");
    expect_error(with("modalities", Json::array({"text", "text"})), "modalities[1]", "repeats");
    expect_error(with("modalities", Json::array()), "modalities");
    expect_error(with("audio", "alloy"), "audio", "an object");
    expect_error(with("audio", {{"voice", 1}}), "audio.voice");
    expect_error(with("audio", {{"format", "aac"}}), "audio.format", "aac");
    expect_error(with("stream_options", true), "stream_options");
    expect_error(with("stage_sampling", Json::array()), "stage_sampling");
    expect_error(with("stage_sampling", {{"talker", 1}}), "stage_sampling.talker");
    expect_error(with("stage_sampling", {{"talker", {{"temperature", 9}}}}),
                 "stage_sampling.talker.temperature");
    expect_error(with("stage_params", {{"s", "x"}}), "stage_params.s");
    expect_error(with("stage_params", {{"", Json::object()}}), "stage_params.");
}

TEST(ChatRequest, StreamOptionsNeedStream) {
    expect_error(with("stream_options", {{"include_usage", true}}), "stream_options", "stream");
    Json body = with("stream", true);
    body["stream_options"] = {{"include_usage", "yes"}};
    expect_error(body, "stream_options.include_usage", "a boolean");
}

TEST(ChatRequest, ModelAndMessagesRequired) {
    Json no_model = minimal();
    no_model.erase("model");
    expect_error(no_model, "model", "required");
    expect_error(with("model", ""), "model", "required");
    Json no_messages = minimal();
    no_messages.erase("messages");
    expect_error(no_messages, "messages", "required");
    expect_error(with("messages", Json::array()), "messages", "empty");
    expect_error(with("messages", "hi"), "messages", "an array");
    expect_error(with("messages", Json::array({"hi"})), "messages[0]", "an object");
}

TEST(ChatRequest, MessageErrors) {
    auto message = [](Json m) { return with("messages", Json::array({m})); };
    expect_error(message({{"content", "x"}}), "messages[0].role", "required");
    expect_error(message({{"role", "bot"}, {"content", "x"}}), "messages[0].role", "bot");
    expect_error(message({{"role", "user"}}), "messages[0].content", "required");
    expect_error(message({{"role", "user"}, {"content", 5}}), "messages[0].content");
    expect_error(message({{"role", "tool"}, {"content", "x"}}), "messages[0].tool_call_id");
    expect_error(message({{"role", "user"}, {"content", "x"}, {"name", 1}}), "messages[0].name");
    auto part = [&](Json p) { return message({{"role", "user"}, {"content", Json::array({p})}}); };
    expect_error(part("text"), "messages[0].content[0]", "an object");
    expect_error(part({{"text", "x"}}), "messages[0].content[0].type", "required");
    expect_error(part({{"type", "text"}}), "messages[0].content[0].text", "required");
    expect_error(part({{"type", "text"}, {"text", 1}}), "messages[0].content[0].text");
    expect_error(part({{"type", "file"}}), "messages[0].content[0].type", "file");
    expect_error(part({{"type", "image_url"}}), "messages[0].content[0].image_url", "required");
    expect_error(part({{"type", "image_url"}, {"image_url", 5}}),
                 "messages[0].content[0].image_url");
    expect_error(part({{"type", "image_url"}, {"image_url", Json::object()}}),
                 "messages[0].content[0].image_url.url", "required");
    expect_error(part({{"type", "image_url"}, {"image_url", {{"url", "https://x/y.png"}}}}),
                 "messages[0].content[0].image_url.url", "remote");
    expect_error(part({{"type", "image_url"},
                       {"image_url", {{"url", "data:image/png;base64,aGk="}, {"detail", "max"}}}}),
                 "messages[0].content[0].image_url.detail");
    expect_error(part({{"type", "input_audio"}, {"input_audio", {{"data", "aGk="}}}}),
                 "messages[0].content[0].input_audio.format", "required");
    expect_error(
        part({{"type", "input_audio"}, {"input_audio", {{"data", "aGk"}, {"format", "wav"}}}}),
        "messages[0].content[0].input_audio.data", "base64");
    expect_error(
        part({{"type", "video_url"}, {"video_url", {{"url", "data:image/png;base64,aGk="}}}}),
        "messages[0].content[0].video_url.url", "video/*");
    // Media only in user messages.
    expect_error(
        with("messages",
             Json::array(
                 {{{"role", "system"},
                   {"content", Json::array({{{"type", "image_url"},
                                             {"image_url", "data:image/png;base64,aGk="}}})}}})),
        "messages[0].content[0].type", "user messages");
    // The error names the second message's part.
    Json two = minimal();
    two["messages"].push_back(
        {{"role", "user"},
         {"content", Json::array({{{"type", "text"}, {"text", "ok"}},
                                  {{"type", "image_url"}, {"image_url", {{"url", ""}}}}})}});
    expect_error(two, "messages[1].content[1].image_url.url", "empty");
}

TEST(ChatRequest, ImageUrlAsBareString) {
    Json body =
        with("messages",
             Json::array(
                 {{{"role", "user"},
                   {"content", Json::array({{{"type", "image_url"},
                                             {"image_url", "data:image/jpeg;base64,aGk="}}})}}}));
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->messages[0].content[0].media.mime, "image/jpeg");
}

TEST(ChatRequest, HostileBodies) {
    auto raw = [](std::string_view body, const std::string& fragment, int status = 400) {
        auto result = parse_chat_request(body, RequestLimits{}, MediaPolicy{});
        ASSERT_FALSE(result.has_value()) << body.substr(0, 80);
        EXPECT_EQ(result.error().http_status, status);
        EXPECT_NE(result.error().message.find(fragment), std::string::npos)
            << result.error().message;
    };
    raw("", "empty");
    raw("   \n", "empty");
    raw("{", "not valid JSON");
    raw(R"({"model": "m", "messages": [)", "not valid JSON");
    raw(R"({"model": "m"} trailing)", "not valid JSON");
    raw(R"({"model": "m", /* c */ "messages": []})", "not valid JSON");
    raw("[1, 2]", "must be a JSON object");
    raw("\"text\"", "must be a JSON object");
    raw("null", "must be a JSON object");
    raw(std::string(100000, '[') + std::string(100000, ']'), "nests deeper");
    raw("{\"a\":" + std::string(40, '{') + std::string(40, '}') + "}", "nests deeper");
    // Invalid UTF-8 inside a string; a lone surrogate escape.
    raw("{\"model\": \"m\xff\", \"messages\": []}", "not valid JSON");
    raw(R"({"model": "\ud800", "messages": []})", "not valid JSON");
    raw(std::string("{\"model\": \"m\0\"}", 15), "not valid JSON");
    // Huge numbers.
    auto huge = parse_chat_request(
        R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1e400})", {}, {});
    ASSERT_FALSE(huge.has_value());  // the parser refuses a number beyond double
    EXPECT_EQ(huge.error().http_status, 400);
    auto big_int = parse_chat_request(
        R"({"model":"m","messages":[{"role":"user","content":"x"}],"seed":18446744073709551615})",
        {}, {});
    ASSERT_FALSE(big_int.has_value());
    EXPECT_EQ(big_int.error().param, "seed");
    auto bigger = parse_chat_request(
        R"({"model":"m","messages":[{"role":"user","content":"x"}],"seed":1e30})", {}, {});
    ASSERT_FALSE(bigger.has_value());
    EXPECT_EQ(bigger.error().param, "seed");
    auto max_tokens = parse_chat_request(
        R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":99999999999999999999999})",
        {}, {});
    ASSERT_FALSE(max_tokens.has_value());
    EXPECT_EQ(max_tokens.error().param, "max_tokens");
}

TEST(ChatRequest, DepthInsideStringsDoesNotCount) {
    Json body = minimal();
    body["messages"][0]["content"] = std::string(1000, '[') + "\"\\\"{";
    EXPECT_TRUE(parse(body).has_value());
}

TEST(ChatRequest, Limits) {
    RequestLimits limits;
    limits.max_body_bytes = 64;
    auto too_big = parse_chat_request(std::string(65, ' '), limits, {});
    ASSERT_FALSE(too_big.has_value());
    EXPECT_EQ(too_big.error().http_status, 413);

    limits = {};
    limits.max_messages = 2;
    Json body = minimal();
    body["messages"] =
        Json::array({minimal()["messages"][0], minimal()["messages"][0], minimal()["messages"][0]});
    auto many = parse(body, limits);
    ASSERT_FALSE(many.has_value());
    EXPECT_EQ(many.error().param, "messages");

    limits = {};
    limits.max_parts = 1;
    Json parts = with(
        "messages", Json::array({{{"role", "user"},
                                  {"content", Json::array({{{"type", "text"}, {"text", "a"}},
                                                           {{"type", "text"}, {"text", "b"}}})}}}));
    auto many_parts = parse(parts, limits);
    ASSERT_FALSE(many_parts.has_value());
    EXPECT_EQ(many_parts.error().param, "messages[0].content");

    limits = {};
    limits.max_string_bytes = 4;
    auto long_text =
        parse(with("messages", Json::array({{{"role", "user"}, {"content", "12345"}}})), limits);
    ASSERT_FALSE(long_text.has_value());
    EXPECT_EQ(long_text.error().param, "messages[0].content");

    limits = {};
    limits.max_stop_sequences = 1;
    auto stops = parse(with("stop", Json::array({"a", "b"})), limits);
    ASSERT_FALSE(stops.has_value());
    EXPECT_EQ(stops.error().param, "stop");

    limits = {};
    limits.max_stages = 1;
    auto stages =
        parse(with("stage_params", {{"a", Json::object()}, {"b", Json::object()}}), limits);
    ASSERT_FALSE(stages.has_value());
    EXPECT_EQ(stages.error().param, "stage_params");

    limits = {};
    limits.max_json_values = 100;
    Json wide = with("stage_params", {{"s", {{"x", Json(std::vector<int>(200, 0))}}}});
    auto values = parse(wide, limits);
    ASSERT_FALSE(values.has_value());
    EXPECT_NE(values.error().message.find("JSON values"), std::string::npos);
    EXPECT_TRUE(parse(with("stop", "a,b,c"), limits).has_value());  // commas in strings

    limits = {};
    limits.max_depth = 3;
    auto deep = parse(minimal(), limits);  // depth 3: {messages:[{...}]}
    EXPECT_TRUE(deep.has_value());
    auto deeper = parse(with("stage_params", {{"s", {{"x", {{"y", 1}}}}}}), limits);
    ASSERT_FALSE(deeper.has_value());
}

TEST(ChatRequest, LocalMediaFollowsThePolicy) {
    Json body = with(
        "messages",
        Json::array({{{"role", "user"},
                      {"content", Json::array({{{"type", "image_url"},
                                                {"image_url", {{"url", "/etc/hostname"}}}}})}}}));
    auto refused = parse(body);
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().param, "messages[0].content[0].image_url.url");
}

TEST(ChatRequest, ToOmniRequestLayout) {
    Json body = minimal();
    body["messages"] = Json::array({
        {{"role", "system"}, {"content", "sys"}},
        {{"role", "user"},
         {"name", "ann"},
         {"content",
          Json::array(
              {{{"type", "text"}, {"text", "look"}},
               {{"type", "image_url"},
                {"image_url", {{"url", "data:image/png;base64,aGk="}, {"detail", "high"}}}}})}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "r"}},
    });
    body["modalities"] = {"text", "audio"};
    body["audio"] = {{"voice", "v"}, {"format", "wav"}};
    body["temperature"] = 0.25;
    body["top_k"] = 3;
    body["seed"] = 9;
    body["max_tokens"] = 10;
    body["stop"] = "S";
    body["stream"] = true;
    body["stage_sampling"] = {{"talker", {{"top_p", 0.5}}}};
    body["stage_params"] = {{"vocoder", {{"steps", 4}}}};
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    const OmniRequest omni = to_omni_request(*request);

    const Value expected_inputs(Map{
        {"messages",
         Value(List{
             Value(Map{{"role", Value("system")},
                       {"content",
                        Value(List{Value(Map{{"type", Value("text")}, {"text", Value("sys")}})})}}),
             Value(Map{{"role", Value("user")},
                       {"name", Value("ann")},
                       {"content",
                        Value(List{Value(Map{{"type", Value("text")}, {"text", Value("look")}}),
                                   Value(Map{{"type", Value("image")},
                                             {"mime", Value("image/png")},
                                             {"source", Value("bytes")},
                                             {"data", Value(Bytes{{'h', 'i'}})},
                                             {"detail", Value("high")}})})}}),
             Value(Map{{"role", Value("tool")},
                       {"tool_call_id", Value("c1")},
                       {"content",
                        Value(List{Value(Map{{"type", Value("text")}, {"text", Value("r")}})})}}),
         })},
        {"modalities", Value(List{Value("text"), Value("audio")})},
        {"audio", Value(Map{{"voice", Value("v")}, {"format", Value("wav")}})},
    });
    EXPECT_EQ(omni.inputs, expected_inputs) << omni.inputs.debug_string();

    const Value expected_params(Map{
        {"sampling",
         Value(Map{{"temperature", Value(0.25)}, {"top_k", Value(3)}, {"seed", Value(9)}})},
        {"stage_sampling", Value(Map{{"talker", Value(Map{{"top_p", Value(0.5)}})}})},
        {"stage_params", Value(Map{{"vocoder", Value(Map{{"steps", Value(4)}})}})},
        {"max_tokens", Value(10)},
        {"stop", Value(List{Value("S")})},
        {"seed", Value(9)},
        {"stream", Value(true)},
    });
    EXPECT_EQ(omni.params, expected_params) << omni.params.debug_string();
    EXPECT_EQ(omni.metadata, Value(Map{{"api", Value("chat.completions")}, {"model", Value("m")}}));
}

TEST(ChatRequest, ToOmniRequestMinimal) {
    auto request = parse(minimal());
    ASSERT_TRUE(request.has_value());
    const OmniRequest omni = to_omni_request(*request);
    EXPECT_EQ(*omni.params.find("sampling"), Value(Map{}));
    EXPECT_EQ(omni.params.find("max_tokens"), nullptr);
    EXPECT_EQ(omni.params.find("seed"), nullptr);
    EXPECT_EQ(*omni.params.find("stream"), Value(false));
    EXPECT_EQ(*omni.params.find("stop"), Value(List{}));
    EXPECT_EQ(*omni.inputs.find("modalities"), Value(List{Value("text")}));
}

TEST(ChatRequest, Logprobs) {
    auto absent = parse(minimal());
    ASSERT_TRUE(absent.has_value());
    EXPECT_FALSE(absent->logprobs);
    EXPECT_FALSE(absent->top_logprobs);

    Json body = with("logprobs", true);
    body["top_logprobs"] = 5;
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_TRUE(request->logprobs);
    EXPECT_EQ(request->top_logprobs, 5);

    auto alone = parse(with("logprobs", true));
    ASSERT_TRUE(alone.has_value());
    EXPECT_TRUE(alone->logprobs);
    EXPECT_FALSE(alone->top_logprobs);

    for (int n : {0, 20}) {
        body["top_logprobs"] = n;
        auto edge = parse(body);
        ASSERT_TRUE(edge.has_value()) << n << ": " << edge.error().message;
        EXPECT_EQ(edge->top_logprobs, n);
    }
    // top_logprobs: null counts as absent, with or without logprobs.
    Json null_top = with("top_logprobs", nullptr);
    EXPECT_TRUE(parse(null_top).has_value());
}

TEST(ChatRequest, LogprobsErrors) {
    expect_error(with("top_logprobs", 3), "top_logprobs", "needs 'logprobs'");
    Json off = with("logprobs", false);
    off["top_logprobs"] = 3;
    expect_error(off, "top_logprobs", "needs 'logprobs'");
    Json on = with("logprobs", true);
    on["top_logprobs"] = 21;
    expect_error(on, "top_logprobs", "[0, 20]");
    on["top_logprobs"] = -1;
    expect_error(on, "top_logprobs", "got -1");
    on["top_logprobs"] = 1.5;
    expect_error(on, "top_logprobs", "an integer");
    on["top_logprobs"] = "5";
    expect_error(on, "top_logprobs", "an integer");
    expect_error(with("logprobs", 1), "logprobs", "a boolean");
    expect_error(with("logprobs", "true"), "logprobs", "a boolean");
}

TEST(ChatRequest, LogprobsReachTheSampling) {
    Json body = with("logprobs", true);
    body["top_logprobs"] = 4;
    body["temperature"] = 0.5;
    auto request = parse(body);
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(
        *to_omni_request(*request).params.find("sampling"),
        Value(Map{
            {"temperature", Value(0.5)}, {"logprobs", Value(true)}, {"top_logprobs", Value(4)}}));
    // logprobs alone: the chosen token's log probability, no alternatives.
    auto alone = parse(with("logprobs", true));
    ASSERT_TRUE(alone.has_value());
    EXPECT_EQ(*to_omni_request(*alone).params.find("sampling"),
              Value(Map{{"logprobs", Value(true)}, {"top_logprobs", Value(0)}}));
    // logprobs false: nothing is asked for.
    auto off = parse(with("logprobs", false));
    ASSERT_TRUE(off.has_value());
    EXPECT_EQ(*to_omni_request(*off).params.find("sampling"), Value(Map{}));
}

TEST(ChatRequest, SamplingExtras) {
    Json body = minimal();
    body["min_tokens"] = 4;
    body["ignore_eos"] = true;
    body["stop_token_ids"] = {0, 151645, 2147483647};
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->sampling.min_tokens, 4);
    EXPECT_EQ(request->sampling.ignore_eos, true);
    EXPECT_EQ(request->sampling.stop_token_ids, (std::vector<std::int64_t>{0, 151645, 2147483647}));
    EXPECT_EQ(
        *to_omni_request(*request).params.find("sampling"),
        Value(Map{{"min_tokens", Value(4)},
                  {"ignore_eos", Value(true)},
                  {"stop_token_ids", Value(List{Value(0), Value(151645), Value(2147483647)})}}));
    auto zero = parse(with("min_tokens", 0));
    ASSERT_TRUE(zero.has_value());
    EXPECT_EQ(zero->sampling.min_tokens, 0);
    auto empty = parse(with("stop_token_ids", Json::array()));
    ASSERT_TRUE(empty.has_value());
    EXPECT_EQ(empty->sampling.stop_token_ids, std::vector<std::int64_t>{});
    EXPECT_EQ(*to_omni_request(*empty).params.find("sampling"),
              Value(Map{{"stop_token_ids", Value(List{})}}));
    auto stage = parse(
        with("stage_sampling",
             {{"talker", {{"min_tokens", 2}, {"ignore_eos", false}, {"stop_token_ids", {9}}}}}));
    ASSERT_TRUE(stage.has_value()) << stage.error().message;
    EXPECT_EQ(stage->stage_sampling.at("talker").min_tokens, 2);
    EXPECT_EQ(stage->stage_sampling.at("talker").ignore_eos, false);
    EXPECT_EQ(stage->stage_sampling.at("talker").stop_token_ids, std::vector<std::int64_t>{9});
    auto nulls = parse(with("stop_token_ids", nullptr));
    ASSERT_TRUE(nulls.has_value());
    EXPECT_FALSE(nulls->sampling.stop_token_ids);
}

TEST(ChatRequest, SamplingExtrasErrors) {
    expect_error(with("min_tokens", -1), "min_tokens", "must be >= 0, got -1");
    expect_error(with("min_tokens", 1.5), "min_tokens", "an integer");
    expect_error(with("min_tokens", "2"), "min_tokens", "an integer");
    expect_error(with("ignore_eos", "yes"), "ignore_eos", "a boolean");
    expect_error(with("ignore_eos", 1), "ignore_eos", "a boolean");
    expect_error(with("stop_token_ids", 5), "stop_token_ids", "an array");
    expect_error(with("stop_token_ids", "1,2"), "stop_token_ids", "an array");
    expect_error(with("stop_token_ids", Json::array({1, -1})), "stop_token_ids[1]", "token id");
    expect_error(with("stop_token_ids", Json::array({1, 2.5})), "stop_token_ids[1]");
    expect_error(with("stop_token_ids", Json::array({1, "2"})), "stop_token_ids[1]");
    expect_error(with("stop_token_ids", Json::array({nullptr})), "stop_token_ids[0]");
    expect_error(with("stop_token_ids", Json::array({1, 2147483648LL})), "stop_token_ids[1]");
    expect_error(with("stop_token_ids", Json::array({Json::array({1})})), "stop_token_ids[0]");
    expect_error(with("stop_token_ids", Json(std::vector<int>(1025, 1))), "stop_token_ids",
                 "at most 1024");
    EXPECT_TRUE(parse(with("stop_token_ids", Json(std::vector<int>(1024, 1)))).has_value());
    expect_error(with("stage_sampling", {{"talker", {{"stop_token_ids", {1, -3}}}}}),
                 "stage_sampling.talker.stop_token_ids[1]");
    expect_error(with("stage_sampling", {{"talker", {{"min_tokens", -2}}}}),
                 "stage_sampling.talker.min_tokens");
    expect_error(with("stage_sampling", {{"talker", {{"ignore_eos", "no"}}}}),
                 "stage_sampling.talker.ignore_eos");
}

// `user` is the routing key of stage replicas (docs/pipeline.md "Replicas").
TEST(ChatRequest, UserBecomesTheRoutingKeyInMetadata) {
    auto request = parse(with("user", "alice"));
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->user, "alice");
    OmniRequest omni = to_omni_request(*request);
    ASSERT_NE(omni.metadata.find("user"), nullptr);
    EXPECT_EQ(*omni.metadata.find("user"), Value("alice"));
    // Without one, metadata has no user.
    auto plain = parse(minimal());
    ASSERT_TRUE(plain.has_value());
    EXPECT_EQ(to_omni_request(*plain).metadata.find("user"), nullptr);
    expect_error(with("user", 7), "user");
    expect_error(with("user", std::string(300, 'u')), "user");
}

}  // namespace
}  // namespace omnirt::serve::openai

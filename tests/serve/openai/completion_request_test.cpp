#include "serve/openai/completion_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<std::int64_t>;

Json minimal() { return Json{{"model", "m"}, {"prompt", "Once upon a time"}}; }

Json with(std::string_view key, Json value) {
    Json body = minimal();
    body[std::string(key)] = std::move(value);
    return body;
}

ProtocolResult<CompletionRequest> parse(const Json& body, RequestLimits limits = {}) {
    return parse_completion_request(body.dump(), limits);
}

// Expects a 400 naming `param` whose message contains `fragment`.
void expect_error(const Json& body, const std::string& param, const std::string& fragment = "",
                  RequestLimits limits = {}) {
    auto result = parse(body, limits);
    ASSERT_FALSE(result.has_value()) << body.dump();
    EXPECT_EQ(result.error().http_status, 400) << body.dump();
    EXPECT_EQ(result.error().param, param) << body.dump() << ": " << result.error().message;
    EXPECT_EQ(result.error().type, "invalid_request_error");
    EXPECT_NE(result.error().message.find(fragment), std::string::npos) << result.error().message;
}

// The prompt a valid body decodes to.
std::variant<std::string, Ids> prompt_of(const Json& prompt) {
    auto request = parse(with("prompt", prompt));
    EXPECT_TRUE(request.has_value()) << prompt.dump() << ": " << request.error().message;
    return request ? request->prompt : std::variant<std::string, Ids>{};
}

TEST(CompletionRequest, MinimalDefaults) {
    auto request = parse(minimal());
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->model, "m");
    EXPECT_EQ(request->prompt, (std::variant<std::string, Ids>{"Once upon a time"}));
    EXPECT_EQ(request->max_tokens, 16);
    EXPECT_EQ(request->max_tokens, kDefaultCompletionMaxTokens);
    EXPECT_EQ(request->sampling, SamplingParams{});
    EXPECT_TRUE(request->stop.empty());
    EXPECT_FALSE(request->stream);
    EXPECT_FALSE(request->include_usage);
    EXPECT_FALSE(request->logprobs);
    EXPECT_TRUE(request->stage_sampling.empty());
    EXPECT_TRUE(request->stage_params.empty());
}

TEST(CompletionRequest, PromptForms) {
    EXPECT_EQ(prompt_of("hi"), (std::variant<std::string, Ids>{"hi"}));
    EXPECT_EQ(prompt_of(Json::array({1, 2, 3})), (std::variant<std::string, Ids>{Ids{1, 2, 3}}));
    EXPECT_EQ(prompt_of(Json::array({"hi"})), (std::variant<std::string, Ids>{"hi"}));
    EXPECT_EQ(prompt_of(Json::array({Json::array({4, 5})})),
              (std::variant<std::string, Ids>{Ids{4, 5}}));
    // Token ids at both ends of the range; 0 is a token too.
    EXPECT_EQ(prompt_of(Json::array({0, 2147483647})),
              (std::variant<std::string, Ids>{Ids{0, 2147483647}}));
    // A single id list of one id is one prompt, not one prompt per id.
    EXPECT_EQ(prompt_of(Json::array({7})), (std::variant<std::string, Ids>{Ids{7}}));
}

TEST(CompletionRequest, EveryField) {
    Json body = minimal();
    body["temperature"] = 0.5;
    body["top_p"] = 0.9;
    body["top_k"] = 4;
    body["seed"] = 11;
    body["min_tokens"] = 2;
    body["ignore_eos"] = true;
    body["stop_token_ids"] = {5, 6};
    body["max_tokens"] = 32;
    body["stop"] = {"\n\n", "END"};
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    body["logprobs"] = 3;
    body["n"] = 1;
    body["best_of"] = 1;
    body["echo"] = false;
    body["suffix"] = "";
    body["user"] = "u-1";                    // unknown: ignored
    body["logit_bias"] = {{"50256", -100}};  // unknown: ignored
    body["stage_sampling"] = {{"thinker", {{"temperature", 0.1}}}};
    body["stage_params"] = {{"preprocess", {{"enable_thinking", false}}}};
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->sampling.temperature, 0.5);
    EXPECT_EQ(request->sampling.top_p, 0.9);
    EXPECT_EQ(request->sampling.top_k, 4);
    EXPECT_EQ(request->sampling.seed, 11);
    EXPECT_EQ(request->sampling.min_tokens, 2);
    EXPECT_EQ(request->sampling.ignore_eos, true);
    EXPECT_EQ(request->sampling.stop_token_ids, (Ids{5, 6}));
    EXPECT_EQ(request->max_tokens, 32);
    EXPECT_EQ(request->stop, (std::vector<std::string>{"\n\n", "END"}));
    EXPECT_TRUE(request->stream);
    EXPECT_TRUE(request->include_usage);
    EXPECT_EQ(request->logprobs, 3);
    EXPECT_EQ(request->stage_sampling.at("thinker").temperature, 0.1);
    EXPECT_EQ(*request->stage_params.at("preprocess").find("enable_thinking"), Value(false));
}

TEST(CompletionRequest, NullsAreAbsent) {
    Json body = minimal();
    for (const char* key : {"temperature", "max_tokens", "stop", "stream", "stream_options",
                            "logprobs", "n", "best_of", "echo", "suffix", "seed", "min_tokens",
                            "ignore_eos", "stop_token_ids", "stage_sampling", "stage_params"}) {
        body[key] = nullptr;
    }
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->max_tokens, 16);
    EXPECT_FALSE(request->logprobs);
    EXPECT_EQ(request->sampling, SamplingParams{});
}

TEST(CompletionRequest, StopAsStringAndItsErrors) {
    auto request = parse(with("stop", "END"));
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(request->stop, std::vector<std::string>{"END"});
    expect_error(with("stop", 5), "stop");
    expect_error(with("stop", Json::array({"a", 1})), "stop[1]", "a string");
    RequestLimits limits;
    limits.max_stop_sequences = 1;
    expect_error(with("stop", Json::array({"a", "b"})), "stop", "entries", limits);
}

TEST(CompletionRequest, MaxTokens) {
    auto request = parse(with("max_tokens", 1));
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(request->max_tokens, 1);
    expect_error(with("max_tokens", 0), "max_tokens", "[1,");
    expect_error(with("max_tokens", -3), "max_tokens", "got -3");
    expect_error(with("max_tokens", (1 << 20) + 1), "max_tokens");
    expect_error(with("max_tokens", 1.5), "max_tokens", "an integer");
    expect_error(with("max_tokens", "16"), "max_tokens", "an integer");
    RequestLimits limits;
    limits.max_tokens = 8;
    expect_error(with("max_tokens", 9), "max_tokens", "[1, 8]", limits);
    EXPECT_TRUE(parse(with("max_tokens", 8), limits).has_value());
}

TEST(CompletionRequest, LogprobsRange) {
    for (int n : {0, 1, 20}) {
        auto request = parse(with("logprobs", n));
        ASSERT_TRUE(request.has_value()) << n;
        EXPECT_EQ(request->logprobs, n);
    }
    expect_error(with("logprobs", -1), "logprobs", "[0, 20]");
    expect_error(with("logprobs", 21), "logprobs", "got 21");
    expect_error(with("logprobs", 1.5), "logprobs", "an integer");
    expect_error(with("logprobs", true), "logprobs", "an integer");
    expect_error(with("logprobs", "5"), "logprobs");
}

TEST(CompletionRequest, UnsupportedFieldsAreRefusedUnlessNeutral) {
    expect_error(with("n", 2), "n", "one choice");
    expect_error(with("n", 0), "n");
    expect_error(with("n", "1"), "n", "an integer");
    expect_error(with("best_of", 3), "best_of", "one choice");
    expect_error(with("best_of", 1.0), "best_of", "an integer");
    expect_error(with("echo", true), "echo", "not supported");
    expect_error(with("echo", 1), "echo", "a boolean");
    expect_error(with("suffix", "and they lived"), "suffix", "fill-in-the-middle");
    expect_error(with("suffix", 5), "suffix", "a string");
    Json neutral = minimal();
    neutral["n"] = 1;
    neutral["best_of"] = 1;
    neutral["echo"] = false;
    neutral["suffix"] = "";
    EXPECT_TRUE(parse(neutral).has_value());
}

TEST(CompletionRequest, OnePromptPerRequest) {
    expect_error(with("prompt", Json::array({"a", "b"})), "prompt", "2 prompts");
    expect_error(with("prompt", Json::array({Json::array({1}), Json::array({2})})), "prompt",
                 "one prompt per request");
    expect_error(with("prompt", Json::array({"a", 1})), "prompt", "prompts");
}

TEST(CompletionRequest, ModelAndPromptRequired) {
    Json no_model = minimal();
    no_model.erase("model");
    expect_error(no_model, "model", "required");
    expect_error(with("model", ""), "model", "required");
    expect_error(with("model", 3), "model", "a string");
    expect_error(with("model", std::string(300, 'm')), "model");
    Json no_prompt = minimal();
    no_prompt.erase("prompt");
    expect_error(no_prompt, "prompt", "required");
    expect_error(with("prompt", nullptr), "prompt", "required");
}

TEST(CompletionRequest, HostilePrompts) {
    // Empty prompts, at each level.
    expect_error(with("prompt", ""), "prompt", "empty");
    expect_error(with("prompt", Json::array()), "prompt", "empty");
    expect_error(with("prompt", Json::array({""})), "prompt[0]", "empty");
    expect_error(with("prompt", Json::array({Json::array()})), "prompt[0]", "empty");
    // Wrong types.
    expect_error(with("prompt", 5), "prompt", "not an integer");
    expect_error(with("prompt", true), "prompt", "a string or an array of token ids");
    expect_error(with("prompt", Json::object()), "prompt", "not an object");
    expect_error(with("prompt", Json::array({nullptr})), "prompt[0]", "not null");
    expect_error(with("prompt", Json::array({Json::object()})), "prompt[0]");
    expect_error(with("prompt", Json::array({Json::array({"a"})})), "prompt[0][0]", "token id");
    // Ids that are not token ids: negative, floats, beyond int32, mixed with other types.
    expect_error(with("prompt", Json::array({1, -1})), "prompt[1]", "token id");
    expect_error(with("prompt", Json::array({1.5})), "prompt[0]", "token id");
    expect_error(with("prompt", Json::array({1, 2.0})), "prompt[1]");
    expect_error(with("prompt", Json::array({2147483648LL})), "prompt[0]");
    expect_error(with("prompt", Json::array({std::numeric_limits<std::uint64_t>::max()})),
                 "prompt[0]");
    expect_error(with("prompt", Json::array({std::numeric_limits<std::int64_t>::min()})),
                 "prompt[0]");
    expect_error(with("prompt", Json::array({1, "2"})), "prompt[1]");
    expect_error(with("prompt", Json::array({1, true})), "prompt[1]");
    expect_error(with("prompt", Json::array({1, nullptr})), "prompt[1]");
    expect_error(with("prompt", Json::array({Json::array({3, -4})})), "prompt[0][1]");
    // Integers beyond 64 bits reach the parser as floats.
    auto huge = parse_completion_request(R"({"model":"m","prompt":[1,99999999999999999999999]})",
                                         RequestLimits{});
    ASSERT_FALSE(huge.has_value());
    EXPECT_EQ(huge.error().http_status, 400);
    EXPECT_EQ(huge.error().param, "prompt[1]");
}

TEST(CompletionRequest, PromptLimits) {
    RequestLimits limits;
    limits.max_string_bytes = 4;
    EXPECT_TRUE(parse(with("prompt", "1234"), limits).has_value());
    expect_error(with("prompt", "12345"), "prompt", "too long", limits);
    expect_error(with("prompt", Json::array({"12345"})), "prompt[0]", "too long", limits);
    EXPECT_TRUE(parse(with("prompt", Json::array({1, 2, 3, 4})), limits).has_value());
    expect_error(with("prompt", Json::array({1, 2, 3, 4, 5})), "prompt", "too many", limits);
    expect_error(with("prompt", Json::array({Json::array({1, 2, 3, 4, 5})})), "prompt[0]",
                 "too many", limits);
    limits = {};
    limits.max_body_bytes = 32;
    auto too_big = parse(with("prompt", std::string(64, 'x')), limits);
    ASSERT_FALSE(too_big.has_value());
    EXPECT_EQ(too_big.error().http_status, 413);
}

TEST(CompletionRequest, HostileBodies) {
    for (std::string_view body :
         {std::string_view(""), std::string_view("{"), std::string_view("[1]"),
          std::string_view("\"prompt\""), std::string_view(R"({"model":"m","prompt":"x"} 1)"),
          std::string_view(R"({"model":"m","prompt":"\ud800"})")}) {
        auto result = parse_completion_request(body, RequestLimits{});
        ASSERT_FALSE(result.has_value()) << body;
        EXPECT_EQ(result.error().http_status, 400) << body;
        EXPECT_EQ(result.error().param, "") << body;
    }
    auto huge_logprobs = parse_completion_request(
        R"({"model":"m","prompt":"x","logprobs":18446744073709551615})", RequestLimits{});
    ASSERT_FALSE(huge_logprobs.has_value());
    EXPECT_EQ(huge_logprobs.error().param, "logprobs");
}

TEST(CompletionRequest, SamplingAndStreamErrors) {
    expect_error(with("temperature", 3), "temperature", "[0, 2]");
    expect_error(with("top_k", -2), "top_k");
    expect_error(with("min_tokens", -1), "min_tokens", ">= 0");
    expect_error(with("ignore_eos", "yes"), "ignore_eos", "a boolean");
    expect_error(with("stop_token_ids", Json::array({1, -2})), "stop_token_ids[1]");
    expect_error(with("stream", "true"), "stream", "a boolean");
    expect_error(with("stream_options", {{"include_usage", true}}), "stream_options", "stream");
    expect_error(with("stage_sampling", {{"thinker", {{"top_p", 0}}}}),
                 "stage_sampling.thinker.top_p");
    expect_error(with("stage_params", {{"preprocess", 1}}), "stage_params.preprocess");
}

TEST(CompletionRequest, ToOmniRequestWithAStringPrompt) {
    Json body = minimal();
    body["temperature"] = 0.25;
    body["seed"] = 9;
    body["max_tokens"] = 5;
    body["stop"] = "S";
    body["stream"] = true;
    body["logprobs"] = 2;
    body["stage_params"] = {{"preprocess", {{"enable_thinking", false}}}};
    auto request = parse(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    const OmniRequest omni = to_omni_request(*request);
    EXPECT_EQ(omni.inputs, Value(Map{{"prompt", Value("Once upon a time")}}))
        << omni.inputs.debug_string();
    const Value expected_params(Map{
        {"sampling", Value(Map{{"temperature", Value(0.25)},
                               {"seed", Value(9)},
                               {"logprobs", Value(true)},
                               {"top_logprobs", Value(2)}})},
        {"stage_sampling", Value(Map{})},
        {"stage_params", Value(Map{{"preprocess", Value(Map{{"enable_thinking", Value(false)}})}})},
        {"max_tokens", Value(5)},
        {"stop", Value(List{Value("S")})},
        {"seed", Value(9)},
        {"stream", Value(true)},
    });
    EXPECT_EQ(omni.params, expected_params) << omni.params.debug_string();
    EXPECT_EQ(omni.metadata, Value(Map{{"api", Value("completions")}, {"model", Value("m")}}));
}

TEST(CompletionRequest, ToOmniRequestWithTokenIds) {
    for (const Json& prompt : {Json::array({3, 1, 4}), Json::array({Json::array({3, 1, 4})})}) {
        auto request = parse(with("prompt", prompt));
        ASSERT_TRUE(request.has_value()) << request.error().message;
        const OmniRequest omni = to_omni_request(*request);
        EXPECT_EQ(omni.inputs, Value(Map{{"prompt", Value(List{Value(3), Value(1), Value(4)})}}))
            << omni.inputs.debug_string();
    }
}

TEST(CompletionRequest, ToOmniRequestDefaults) {
    auto request = parse(minimal());
    ASSERT_TRUE(request.has_value());
    const OmniRequest omni = to_omni_request(*request);
    EXPECT_EQ(*omni.params.find("sampling"), Value(Map{}));
    EXPECT_EQ(*omni.params.find("max_tokens"), Value(16));
    EXPECT_EQ(*omni.params.find("stop"), Value(List{}));
    EXPECT_EQ(*omni.params.find("stream"), Value(false));
    EXPECT_EQ(omni.params.find("seed"), nullptr);
    EXPECT_EQ(*omni.metadata.find("api"), Value("completions"));
}

TEST(CompletionRequest, LogprobsZeroStillAsksForTheChosenToken) {
    auto request = parse(with("logprobs", 0));
    ASSERT_TRUE(request.has_value());
    const OmniRequest omni = to_omni_request(*request);
    EXPECT_EQ(*omni.params.find("sampling"),
              Value(Map{{"logprobs", Value(true)}, {"top_logprobs", Value(0)}}));
}

TEST(CompletionRequest, SamplingExtrasReachTheSampling) {
    Json body = minimal();
    body["min_tokens"] = 3;
    body["ignore_eos"] = false;
    body["stop_token_ids"] = Json::array({7});
    auto request = parse(body);
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(*to_omni_request(*request).params.find("sampling"),
              Value(Map{{"min_tokens", Value(3)},
                        {"ignore_eos", Value(false)},
                        {"stop_token_ids", Value(List{Value(7)})}}));
}

}  // namespace
}  // namespace omnirt::serve::openai

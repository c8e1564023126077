#include "serve/openai/tokenize_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

ProtocolResult<TokenizeRequest> tokenize(const Json& body, RequestLimits limits = {}) {
    return parse_tokenize_request(body.dump(), limits);
}
ProtocolResult<DetokenizeRequest> detokenize(const Json& body, RequestLimits limits = {}) {
    return parse_detokenize_request(body.dump(), limits);
}

// Expects a 400 naming `param` whose message contains `fragment`.
template <class T>
void expect_error(const ProtocolResult<T>& result, const std::string& param,
                  const std::string& fragment = "") {
    ASSERT_FALSE(result.has_value()) << "accepted; expected an error naming '" << param << "'";
    EXPECT_EQ(result.error().http_status, 400);
    EXPECT_EQ(result.error().param, param) << result.error().message;
    EXPECT_EQ(result.error().type, "invalid_request_error");
    EXPECT_NE(result.error().message.find(fragment), std::string::npos) << result.error().message;
}

Json user_messages() { return Json::array({{{"role", "user"}, {"content", "hi"}}}); }

TEST(TokenizeRequest, PromptWithDefaults) {
    auto request = tokenize({{"prompt", "Hello world"}});
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->model, "");
    EXPECT_EQ(request->prompt, "Hello world");
    EXPECT_TRUE(request->messages.empty());
    EXPECT_TRUE(request->add_generation_prompt);
    EXPECT_TRUE(request->add_special_tokens);
    EXPECT_FALSE(request->return_token_strs);
}

TEST(TokenizeRequest, ContentIsAnAliasOfPrompt) {
    auto request = tokenize({{"model", "m"}, {"content", "Hello"}});
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->model, "m");
    EXPECT_EQ(request->prompt, "Hello");
    // A null one counts as absent.
    auto null_prompt = tokenize({{"prompt", nullptr}, {"content", "x"}});
    ASSERT_TRUE(null_prompt.has_value()) << null_prompt.error().message;
    EXPECT_EQ(null_prompt->prompt, "x");
    auto null_content = tokenize({{"prompt", "y"}, {"content", nullptr}});
    ASSERT_TRUE(null_content.has_value()) << null_content.error().message;
    EXPECT_EQ(null_content->prompt, "y");
}

TEST(TokenizeRequest, AnEmptyPromptIsAccepted) {
    auto request = tokenize({{"prompt", ""}});
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->prompt, "");
}

TEST(TokenizeRequest, AliasPairsMayNotBothBePresent) {
    expect_error(tokenize({{"prompt", "a"}, {"content", "b"}}), "prompt", "not both");
    expect_error(tokenize({{"prompt", "a"}, {"add_special_tokens", true}, {"add_special", true}}),
                 "add_special_tokens", "not both");
    expect_error(tokenize({{"prompt", "a"}, {"return_token_strs", true}, {"with_pieces", false}}),
                 "return_token_strs", "not both");
}

TEST(TokenizeRequest, PromptOrMessagesExactlyOne) {
    expect_error(tokenize(Json::object()), "prompt", "required");
    expect_error(tokenize({{"model", "m"}, {"prompt", nullptr}, {"messages", nullptr}}), "prompt",
                 "required");
    expect_error(tokenize({{"prompt", "a"}, {"messages", user_messages()}}), "messages",
                 "not both");
    expect_error(tokenize({{"content", "a"}, {"messages", user_messages()}}), "messages",
                 "not both");
}

TEST(TokenizeRequest, Messages) {
    Json body = {{"messages", Json::array({{{"role", "system"}, {"content", "be brief"}},
                                           {{"role", "user"}, {"content", "hi"}}})},
                 {"add_generation_prompt", false}};
    auto request = tokenize(body);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_FALSE(request->prompt);
    ASSERT_EQ(request->messages.size(), 2u);
    EXPECT_EQ(request->messages[0].role, "system");
    ASSERT_EQ(request->messages[1].content.size(), 1u);
    EXPECT_EQ(request->messages[1].content[0].text, "hi");
    EXPECT_FALSE(request->add_generation_prompt);
    auto with_prompt = tokenize({{"messages", user_messages()}});
    ASSERT_TRUE(with_prompt.has_value());
    EXPECT_TRUE(with_prompt->add_generation_prompt);
}

TEST(TokenizeRequest, MessageErrorsNameTheField) {
    expect_error(tokenize({{"messages", Json::array()}}), "messages", "empty");
    expect_error(tokenize({{"messages", "hi"}}), "messages", "an array");
    expect_error(tokenize({{"messages", Json::array({{{"role", "bot"}, {"content", "x"}}})}}),
                 "messages[0].role", "bot");
    expect_error(tokenize({{"messages", Json::array({{{"role", "user"}}})}}), "messages[0].content",
                 "required");
    // No media is fetched or read here: remote URLs and local paths are refused.
    Json remote = Json::array(
        {{{"role", "user"},
          {"content", Json::array({{{"type", "image_url"},
                                    {"image_url", {{"url", "https://example.com/a.png"}}}}})}}});
    expect_error(tokenize({{"messages", remote}}), "messages[0].content[0].image_url.url",
                 "remote");
    Json local = remote;
    local[0]["content"][0]["image_url"]["url"] = "/etc/hostname";
    expect_error(tokenize({{"messages", local}}), "messages[0].content[0].image_url.url");
}

TEST(TokenizeRequest, FlagsAndTheirAliases) {
    auto request = tokenize({{"prompt", "x"}, {"add_special", false}, {"with_pieces", true}});
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_FALSE(request->add_special_tokens);
    EXPECT_TRUE(request->return_token_strs);
    auto vllm =
        tokenize({{"prompt", "x"}, {"add_special_tokens", false}, {"return_token_strs", true}});
    ASSERT_TRUE(vllm.has_value()) << vllm.error().message;
    EXPECT_FALSE(vllm->add_special_tokens);
    EXPECT_TRUE(vllm->return_token_strs);
}

TEST(TokenizeRequest, WrongTypes) {
    expect_error(tokenize({{"prompt", 5}}), "prompt", "a string");
    expect_error(tokenize({{"prompt", Json::array({1, 2})}}), "prompt", "a string");
    expect_error(tokenize({{"content", true}}), "content", "a string");
    expect_error(tokenize({{"prompt", "x"}, {"model", 1}}), "model", "a string");
    expect_error(tokenize({{"prompt", "x"}, {"add_generation_prompt", "yes"}}),
                 "add_generation_prompt", "a boolean");
    expect_error(tokenize({{"prompt", "x"}, {"add_special_tokens", 1}}), "add_special_tokens",
                 "a boolean");
    expect_error(tokenize({{"prompt", "x"}, {"add_special", 0}}), "add_special", "a boolean");
    expect_error(tokenize({{"prompt", "x"}, {"return_token_strs", "true"}}), "return_token_strs");
    expect_error(tokenize({{"prompt", "x"}, {"with_pieces", 1}}), "with_pieces", "a boolean");
}

TEST(TokenizeRequest, Limits) {
    RequestLimits limits;
    limits.max_string_bytes = 4;
    EXPECT_TRUE(tokenize({{"prompt", "1234"}}, limits).has_value());
    expect_error(tokenize({{"prompt", "12345"}}, limits), "prompt", "longer than");
    expect_error(tokenize({{"content", "12345"}}, limits), "content", "longer than");
    limits = {};
    limits.max_body_bytes = 16;
    auto too_big = tokenize({{"prompt", std::string(32, 'x')}}, limits);
    ASSERT_FALSE(too_big.has_value());
    EXPECT_EQ(too_big.error().http_status, 413);
}

TEST(TokenizeRequest, MalformedBodies) {
    for (std::string_view body :
         {std::string_view(""), std::string_view("{"), std::string_view("[\"prompt\"]"),
          std::string_view("{\"prompt\": \"a\"} x"), std::string_view("{\"prompt\": \"\xff\"}")}) {
        auto tokenized = parse_tokenize_request(body, RequestLimits{});
        ASSERT_FALSE(tokenized.has_value()) << body;
        EXPECT_EQ(tokenized.error().http_status, 400);
        EXPECT_EQ(tokenized.error().param, "");
        auto detokenized = parse_detokenize_request(body, RequestLimits{});
        ASSERT_FALSE(detokenized.has_value()) << body;
        EXPECT_EQ(detokenized.error().http_status, 400);
        EXPECT_EQ(detokenized.error().param, "");
    }
}

TEST(DetokenizeRequest, Tokens) {
    auto request = detokenize({{"model", "m"}, {"tokens", Json::array({0, 1, 2147483647})}});
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->model, "m");
    EXPECT_EQ(request->tokens, (std::vector<std::int64_t>{0, 1, 2147483647}));
    auto empty = detokenize({{"tokens", Json::array()}});
    ASSERT_TRUE(empty.has_value()) << empty.error().message;
    EXPECT_EQ(empty->model, "");
    EXPECT_TRUE(empty->tokens.empty());
}

TEST(DetokenizeRequest, TokenIdsAreValidated) {
    expect_error(detokenize(Json::object()), "tokens", "required");
    expect_error(detokenize({{"tokens", nullptr}}), "tokens", "required");
    expect_error(detokenize({{"tokens", "1 2 3"}}), "tokens", "not a string");
    expect_error(detokenize({{"tokens", 5}}), "tokens", "an array");
    expect_error(detokenize({{"tokens", Json::array({1, -1})}}), "tokens[1]", "token id");
    expect_error(detokenize({{"tokens", Json::array({1.5})}}), "tokens[0]", "token id");
    expect_error(detokenize({{"tokens", Json::array({1, 2, 3.0})}}), "tokens[2]");
    expect_error(detokenize({{"tokens", Json::array({2147483648LL})}}), "tokens[0]");
    expect_error(detokenize({{"tokens", Json::array({std::numeric_limits<std::uint64_t>::max()})}}),
                 "tokens[0]");
    expect_error(detokenize({{"tokens", Json::array({"1"})}}), "tokens[0]");
    expect_error(detokenize({{"tokens", Json::array({true})}}), "tokens[0]");
    expect_error(detokenize({{"tokens", Json::array({nullptr})}}), "tokens[0]");
    expect_error(detokenize({{"tokens", Json::array({Json::array({1})})}}), "tokens[0]");
    expect_error(detokenize({{"tokens", Json::array({1})}, {"model", 2}}), "model");
    auto huge =
        parse_detokenize_request(R"({"tokens":[1,99999999999999999999999]})", RequestLimits{});
    ASSERT_FALSE(huge.has_value());
    EXPECT_EQ(huge.error().param, "tokens[1]");
}

}  // namespace
}  // namespace omnirt::serve::openai

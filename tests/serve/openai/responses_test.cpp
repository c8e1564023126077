#include "serve/openai/responses.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/openai/base64.h"

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::ordered_json;

std::vector<std::string> keys(const Json& object) {
    std::vector<std::string> out;
    for (const auto& [key, value] : object.items()) out.push_back(key);
    return out;
}

// Parses one SSE event, checking the framing.
Json event(const std::string& text) {
    EXPECT_EQ(text.rfind("data: ", 0), 0u) << text;
    EXPECT_GE(text.size(), 8u);
    EXPECT_EQ(text.substr(text.size() - 2), "\n\n");
    const std::string payload = text.substr(6, text.size() - 8);
    EXPECT_EQ(payload.find('\n'), std::string::npos) << "an event is one line";
    return Json::parse(payload);
}

using Keys = std::vector<std::string>;

TEST(Responses, ChatCompletionTextOnly) {
    ChatCompletion completion;
    completion.id = "chatcmpl-1";
    completion.created = 1700000000;
    completion.model = "m";
    completion.content = "Hello";
    completion.finish_reason = "length";
    completion.usage = {5, 7};
    const Json json = Json::parse(chat_completion_json(completion));
    EXPECT_EQ(keys(json), (Keys{"id", "object", "created", "model", "choices", "usage"}));
    EXPECT_EQ(json["id"], "chatcmpl-1");
    EXPECT_EQ(json["object"], "chat.completion");
    EXPECT_EQ(json["created"], 1700000000);
    EXPECT_EQ(json["model"], "m");
    ASSERT_EQ(json["choices"].size(), 1u);
    const Json& choice = json["choices"][0];
    EXPECT_EQ(keys(choice), (Keys{"index", "message", "logprobs", "finish_reason"}));
    EXPECT_EQ(choice["index"], 0);
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_TRUE(choice["logprobs"].is_null());
    EXPECT_EQ(keys(choice["message"]), (Keys{"role", "content", "refusal"}));
    EXPECT_EQ(choice["message"]["role"], "assistant");
    EXPECT_EQ(choice["message"]["content"], "Hello");
    EXPECT_EQ(keys(json["usage"]), (Keys{"prompt_tokens", "completion_tokens", "total_tokens"}));
    EXPECT_EQ(json["usage"]["total_tokens"], 12);
}

TEST(Responses, ChatCompletionWithAudio) {
    ChatCompletion completion;
    completion.id = completion_id(1);
    completion.model = "m";
    completion.audio = AudioOutput{"audio_1", {1, 2, 3, 250}, 1700003600, "Hi there"};
    const Json json = Json::parse(chat_completion_json(completion));
    const Json& message = json["choices"][0]["message"];
    EXPECT_TRUE(message["content"].is_null());
    EXPECT_EQ(keys(message["audio"]), (Keys{"id", "data", "expires_at", "transcript"}));
    EXPECT_EQ(message["audio"]["id"], "audio_1");
    EXPECT_EQ(*base64_decode(message["audio"]["data"].get<std::string>()),
              (std::vector<std::uint8_t>{1, 2, 3, 250}));
    EXPECT_EQ(message["audio"]["expires_at"], 1700003600);
    EXPECT_EQ(message["audio"]["transcript"], "Hi there");
    EXPECT_EQ(json["choices"][0]["finish_reason"], "stop");
}

TEST(Responses, InvalidUtf8FromAStageIsReplacedNotThrown) {
    ChatCompletion completion;
    completion.content = std::string("ok\xff");
    std::string text;
    ASSERT_NO_THROW(text = chat_completion_json(completion));
    const Json json = Json::parse(text);
    EXPECT_EQ(json["choices"][0]["message"]["content"], "ok\xEF\xBF\xBD");
    EXPECT_NO_THROW((void)chat_chunk_content(ChunkContext{}, "\xc3"));
}

TEST(Responses, Ids) {
    const std::string id = completion_id(42);
    EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
    EXPECT_EQ(id.size(), 9u + 24u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 9), std::string::npos);
    EXPECT_EQ(completion_id(42), id);
    EXPECT_NE(completion_id(43), id);
    EXPECT_EQ(audio_id(1).rfind("audio_", 0), 0u);
}

TEST(Responses, StreamSequence) {
    const ChunkContext context{"chatcmpl-s", 1700000001, "m", false};
    const Json role = event(chat_chunk_role(context));
    EXPECT_EQ(keys(role), (Keys{"id", "object", "created", "model", "choices"}));
    EXPECT_EQ(role["object"], "chat.completion.chunk");
    EXPECT_EQ(role["id"], "chatcmpl-s");
    const Json& first = role["choices"][0];
    EXPECT_EQ(keys(first), (Keys{"index", "delta", "logprobs", "finish_reason"}));
    EXPECT_EQ(first["delta"], Json({{"role", "assistant"}, {"content", ""}}));
    EXPECT_TRUE(first["finish_reason"].is_null());

    const Json content = event(chat_chunk_content(context, "Hel\"lo\n"));
    EXPECT_EQ(content["choices"][0]["delta"], Json({{"content", "Hel\"lo\n"}}));

    const Json audio = event(
        chat_chunk_audio(context, "audio_9", std::vector<std::uint8_t>{0, 1}, "Hel", 1700003601));
    const Json& audio_delta = audio["choices"][0]["delta"]["audio"];
    EXPECT_EQ(keys(audio_delta), (Keys{"id", "data", "transcript", "expires_at"}));
    EXPECT_EQ(audio_delta["data"], "AAE=");
    const Json bare_audio =
        event(chat_chunk_audio(context, "audio_9", std::vector<std::uint8_t>{7}));
    EXPECT_EQ(keys(bare_audio["choices"][0]["delta"]["audio"]), (Keys{"id", "data"}));

    const Json finish = event(chat_chunk_finish(context, "stop"));
    EXPECT_EQ(finish["choices"][0]["delta"], Json::object());
    EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(Responses, StreamWithUsage) {
    const ChunkContext context{"chatcmpl-u", 1, "m", true};
    const Json content = event(chat_chunk_content(context, "x"));
    EXPECT_EQ(keys(content), (Keys{"id", "object", "created", "model", "choices", "usage"}));
    EXPECT_TRUE(content["usage"].is_null());
    const Json usage = event(chat_chunk_usage(context, Usage{3, 4}));
    EXPECT_EQ(keys(usage), (Keys{"id", "object", "created", "model", "choices", "usage"}));
    EXPECT_EQ(usage["choices"], Json::array());
    EXPECT_EQ(usage["usage"],
              Json({{"prompt_tokens", 3}, {"completion_tokens", 4}, {"total_tokens", 7}}));
}

TEST(Responses, SpeechEvents) {
    const Json delta = event(speech_audio_delta_event(std::vector<std::uint8_t>{'a', 'b', 'c'}));
    EXPECT_EQ(keys(delta), (Keys{"type", "audio"}));
    EXPECT_EQ(delta["type"], "speech.audio.delta");
    EXPECT_EQ(delta["audio"], "YWJj");
    const Json done = event(speech_audio_done_event(Usage{10, 20}));
    EXPECT_EQ(keys(done), (Keys{"type", "usage"}));
    EXPECT_EQ(done["type"], "speech.audio.done");
    EXPECT_EQ(done["usage"],
              Json({{"input_tokens", 10}, {"output_tokens", 20}, {"total_tokens", 30}}));
}

TEST(Responses, ErrorObject) {
    const ProtocolError error{400, "bad 'n'", "invalid_request_error", "n", "bad_n"};
    const Json json = Json::parse(error_json(error));
    EXPECT_EQ(keys(json), (Keys{"error"}));
    EXPECT_EQ(keys(json["error"]), (Keys{"message", "type", "param", "code"}));
    EXPECT_EQ(json["error"]["message"], "bad 'n'");
    EXPECT_EQ(json["error"]["type"], "invalid_request_error");
    EXPECT_EQ(json["error"]["param"], "n");
    EXPECT_EQ(json["error"]["code"], "bad_n");
    const Json nulls = Json::parse(error_json(ProtocolError{500, "boom", "server_error", "", ""}));
    EXPECT_TRUE(nulls["error"]["param"].is_null());
    EXPECT_TRUE(nulls["error"]["code"].is_null());
    EXPECT_EQ(event(error_event(error)), json);
}

TEST(Responses, Models) {
    const std::vector<ModelCard> models{{"qwen", 1700000000, "omnirt"}, {"tts", 5, "me"}};
    const Json json = Json::parse(models_json(models));
    EXPECT_EQ(keys(json), (Keys{"object", "data"}));
    EXPECT_EQ(json["object"], "list");
    ASSERT_EQ(json["data"].size(), 2u);
    EXPECT_EQ(keys(json["data"][0]), (Keys{"id", "object", "created", "owned_by"}));
    EXPECT_EQ(json["data"][0]["object"], "model");
    EXPECT_EQ(json["data"][1]["owned_by"], "me");
    EXPECT_EQ(Json::parse(models_json({})), Json({{"object", "list"}, {"data", Json::array()}}));
}

}  // namespace
}  // namespace omnirt::serve::openai

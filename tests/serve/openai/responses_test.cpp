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

std::vector<std::uint8_t> bytes_of(std::string_view text) {
    return std::vector<std::uint8_t>(text.begin(), text.end());
}

TokenLogprob entry(std::string token, double logprob, std::vector<TokenLogprob> top = {}) {
    std::vector<std::uint8_t> bytes = bytes_of(token);
    return TokenLogprob{std::move(token), logprob, std::move(bytes), std::move(top)};
}

// "Hé" (one token, two characters), " 🙂" (two characters, five bytes), "!" with alternatives.
std::vector<TokenLogprob> sample_logprobs() {
    return {entry("Hé", -0.25, {entry("Hé", -0.25), entry("Ha", -1.5)}),
            entry(" \xF0\x9F\x99\x82", -0.5, {entry(" \xF0\x9F\x99\x82", -0.5)}),
            entry("!", -0.125, {entry("!", -0.125), entry(".", -2.0), entry("?", -3.0)})};
}

TEST(Responses, ChatCompletionWithLogprobs) {
    ChatCompletion completion;
    completion.id = "chatcmpl-l";
    completion.model = "m";
    completion.content = "Hé 🙂!";
    completion.logprobs = sample_logprobs();
    const Json json = Json::parse(chat_completion_json(completion));
    const Json& logprobs = json["choices"][0]["logprobs"];
    EXPECT_EQ(keys(logprobs), (Keys{"content"}));
    ASSERT_EQ(logprobs["content"].size(), 3u);
    const Json& first = logprobs["content"][0];
    EXPECT_EQ(keys(first), (Keys{"token", "logprob", "bytes", "top_logprobs"}));
    EXPECT_EQ(first["token"], "Hé");
    EXPECT_EQ(first["logprob"], -0.25);
    EXPECT_EQ(first["bytes"], Json({72, 195, 169}));
    ASSERT_EQ(first["top_logprobs"].size(), 2u);
    // Alternatives carry no alternatives of their own.
    EXPECT_EQ(keys(first["top_logprobs"][1]), (Keys{"token", "logprob", "bytes"}));
    EXPECT_EQ(first["top_logprobs"][1],
              Json({{"token", "Ha"}, {"logprob", -1.5}, {"bytes", {72, 97}}}));
    EXPECT_EQ(logprobs["content"][1]["bytes"], Json({32, 240, 159, 153, 130}));
    EXPECT_EQ(logprobs["content"][2]["top_logprobs"].size(), 3u);

    // An entry without alternatives (logprobs without top_logprobs) has an empty list.
    completion.logprobs = std::vector<TokenLogprob>{entry("x", -1)};
    const Json bare = Json::parse(chat_completion_json(completion));
    EXPECT_EQ(bare["choices"][0]["logprobs"]["content"][0]["top_logprobs"], Json::array());
    // Asked for but nothing generated: an empty list, not null.
    completion.logprobs = std::vector<TokenLogprob>{};
    const Json none = Json::parse(chat_completion_json(completion));
    EXPECT_EQ(none["choices"][0]["logprobs"], Json({{"content", Json::array()}}));
}

TEST(Responses, ChatChunkWithLogprobs) {
    const ChunkContext context{"chatcmpl-c", 2, "m", false};
    const Json chunk = event(chat_chunk_content(context, "Hé", sample_logprobs()));
    const Json& choice = chunk["choices"][0];
    EXPECT_EQ(keys(choice), (Keys{"index", "delta", "logprobs", "finish_reason"}));
    EXPECT_EQ(choice["delta"], Json({{"content", "Hé"}}));
    ASSERT_EQ(choice["logprobs"]["content"].size(), 3u);
    EXPECT_EQ(choice["logprobs"]["content"][0]["token"], "Hé");
    EXPECT_EQ(choice["logprobs"]["content"][0]["top_logprobs"][1]["token"], "Ha");
    EXPECT_TRUE(choice["finish_reason"].is_null());
    // A token that adds no text yet (an incomplete character) still carries its entry.
    const Json partial = event(chat_chunk_content(
        context, "", std::vector<TokenLogprob>{{"\xEF\xBF\xBD", -0.75, {0xF0, 0x9F}, {}}}));
    EXPECT_EQ(partial["choices"][0]["delta"], Json({{"content", ""}}));
    EXPECT_EQ(partial["choices"][0]["logprobs"]["content"][0]["bytes"], Json({240, 159}));
    EXPECT_EQ(partial["choices"][0]["logprobs"]["content"][0]["token"], "\xEF\xBF\xBD");
    // Without log probabilities the field is null.
    EXPECT_TRUE(event(chat_chunk_content(context, "x"))["choices"][0]["logprobs"].is_null());
    EXPECT_TRUE(event(chat_chunk_role(context))["choices"][0]["logprobs"].is_null());
    EXPECT_TRUE(event(chat_chunk_finish(context, "stop"))["choices"][0]["logprobs"].is_null());
}

TEST(Responses, TextCompletion) {
    TextCompletion completion;
    completion.id = text_completion_id(3);
    completion.created = 1700000002;
    completion.model = "m";
    completion.text = "Hé 🙂!";
    completion.finish_reason = "length";
    completion.usage = {4, 3};
    const Json json = Json::parse(text_completion_json(completion));
    EXPECT_EQ(keys(json), (Keys{"id", "object", "created", "model", "choices", "usage"}));
    EXPECT_EQ(json["id"], completion.id);
    EXPECT_EQ(json["object"], "text_completion");
    EXPECT_EQ(json["created"], 1700000002);
    ASSERT_EQ(json["choices"].size(), 1u);
    const Json& choice = json["choices"][0];
    EXPECT_EQ(keys(choice), (Keys{"index", "text", "logprobs", "finish_reason"}));
    EXPECT_EQ(choice["index"], 0);
    EXPECT_EQ(choice["text"], "Hé 🙂!");
    EXPECT_TRUE(choice["logprobs"].is_null());
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(json["usage"],
              Json({{"prompt_tokens", 4}, {"completion_tokens", 3}, {"total_tokens", 7}}));
}

TEST(Responses, TextCompletionLogprobsAreFourParallelArrays) {
    TextCompletion completion;
    completion.text = "Hé 🙂!";
    completion.logprobs = sample_logprobs();
    const Json json = Json::parse(text_completion_json(completion));
    const Json& logprobs = json["choices"][0]["logprobs"];
    EXPECT_EQ(keys(logprobs), (Keys{"tokens", "token_logprobs", "top_logprobs", "text_offset"}));
    EXPECT_EQ(logprobs["tokens"], Json({"Hé", " 🙂", "!"}));
    EXPECT_EQ(logprobs["token_logprobs"], Json({-0.25, -0.5, -0.125}));
    // Offsets count characters (code points), not bytes: "Hé" is 2, " 🙂" is 2.
    EXPECT_EQ(logprobs["text_offset"], Json({0, 2, 4}));
    ASSERT_EQ(logprobs["top_logprobs"].size(), 3u);
    EXPECT_EQ(logprobs["top_logprobs"][0], Json({{"Hé", -0.25}, {"Ha", -1.5}}));
    EXPECT_EQ(keys(logprobs["top_logprobs"][2]), (Keys{"!", ".", "?"}));  // most likely first

    // Alternatives that read the same (two partial characters): the likelier one stays.
    completion.logprobs = std::vector<TokenLogprob>{
        entry("\xEF\xBF\xBD", -0.5,
              {{"\xEF\xBF\xBD", -0.5, {0xF0}, {}}, {"\xEF\xBF\xBD", -0.9, {0xE4}, {}}})};
    const Json same = Json::parse(text_completion_json(completion));
    EXPECT_EQ(same["choices"][0]["logprobs"]["top_logprobs"][0], Json({{"\xEF\xBF\xBD", -0.5}}));
    // No alternatives asked for: one empty object per token.
    completion.logprobs = std::vector<TokenLogprob>{entry("a", -1), entry("b", -2)};
    const Json bare = Json::parse(text_completion_json(completion));
    EXPECT_EQ(bare["choices"][0]["logprobs"]["top_logprobs"],
              Json::array({Json::object(), Json::object()}));
    EXPECT_EQ(bare["choices"][0]["logprobs"]["text_offset"], Json({0, 1}));
    // A character split across two tokens ("é" = C3 A9) counts once: the offsets follow the
    // bytes, not the U+FFFD each partial token reads as.
    completion.logprobs = std::vector<TokenLogprob>{
        {"\xEF\xBF\xBD", -1, {0xC3}, {}}, {"\xEF\xBF\xBD", -1, {0xA9}, {}}, {"x", -1, {'x'}, {}}};
    const Json split = Json::parse(text_completion_json(completion));
    EXPECT_EQ(split["choices"][0]["logprobs"]["text_offset"], Json({0, 1, 1}));
    // Asked for but nothing generated: four empty arrays.
    completion.logprobs = std::vector<TokenLogprob>{};
    const Json none = Json::parse(text_completion_json(completion));
    EXPECT_EQ(none["choices"][0]["logprobs"], Json({{"tokens", Json::array()},
                                                    {"token_logprobs", Json::array()},
                                                    {"top_logprobs", Json::array()},
                                                    {"text_offset", Json::array()}}));
}

TEST(Responses, TextCompletionStream) {
    const ChunkContext context{"cmpl-s", 7, "m", false};
    const Json first = event(text_completion_chunk(context, "Hé", std::nullopt, 0));
    EXPECT_EQ(keys(first), (Keys{"id", "object", "created", "model", "choices"}));
    EXPECT_EQ(first["object"], "text_completion");
    EXPECT_EQ(first["id"], "cmpl-s");
    EXPECT_EQ(
        first["choices"][0],
        Json({{"index", 0}, {"text", "Hé"}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));

    // A later delta: its offsets start where the delta starts in the output.
    const Json later = event(text_completion_chunk(
        context, " 🙂!", std::vector<TokenLogprob>{sample_logprobs()[1], sample_logprobs()[2]},
        2));
    const Json& logprobs = later["choices"][0]["logprobs"];
    EXPECT_EQ(logprobs["tokens"], Json({" 🙂", "!"}));
    EXPECT_EQ(logprobs["text_offset"], Json({2, 4}));
    EXPECT_EQ(logprobs["top_logprobs"][1], Json({{"!", -0.125}, {".", -2.0}, {"?", -3.0}}));
    EXPECT_TRUE(later["choices"][0]["finish_reason"].is_null());

    const Json finish = event(text_completion_finish(context, "stop"));
    EXPECT_EQ(keys(finish), (Keys{"id", "object", "created", "model", "choices"}));
    EXPECT_EQ(finish["choices"][0],
              Json({{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", "stop"}}));
}

TEST(Responses, TextCompletionStreamWithUsage) {
    const ChunkContext context{"cmpl-u", 8, "m", true};
    const Json delta = event(text_completion_chunk(context, "x", std::nullopt, 0));
    EXPECT_EQ(keys(delta), (Keys{"id", "object", "created", "model", "choices", "usage"}));
    EXPECT_TRUE(delta["usage"].is_null());
    const Json finish = event(text_completion_finish(context, "length"));
    EXPECT_TRUE(finish["usage"].is_null());
    EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
    const Json usage = event(text_completion_usage(context, Usage{2, 5}));
    EXPECT_EQ(keys(usage), (Keys{"id", "object", "created", "model", "choices", "usage"}));
    EXPECT_EQ(usage["object"], "text_completion");
    EXPECT_EQ(usage["choices"], Json::array());
    EXPECT_EQ(usage["usage"],
              Json({{"prompt_tokens", 2}, {"completion_tokens", 5}, {"total_tokens", 7}}));
}

TEST(Responses, TextCompletionIds) {
    const std::string id = text_completion_id(42);
    EXPECT_EQ(id.rfind("cmpl-", 0), 0u);
    EXPECT_EQ(id.size(), 5u + 24u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 5), std::string::npos);
    EXPECT_EQ(text_completion_id(42), id);
    EXPECT_NE(text_completion_id(43), id);
}

TEST(Responses, InvalidUtf8InLogprobTokensIsReplaced) {
    TextCompletion completion;
    completion.logprobs = std::vector<TokenLogprob>{{"\xF0\x9F", -1, {0xF0, 0x9F}, {}}};
    std::string text;
    ASSERT_NO_THROW(text = text_completion_json(completion));
    EXPECT_TRUE(Json::accept(text));
    ChatCompletion chat;
    chat.logprobs = completion.logprobs;
    ASSERT_NO_THROW(text = chat_completion_json(chat));
    EXPECT_TRUE(Json::accept(text));
}

}  // namespace
}  // namespace omnirt::serve::openai

// The API server's /v1/completions, /tokenize and /detokenize, and log probabilities in chat and
// completions, over in-process pipelines: test.token_streamer, a test stage that sends the client
// output protocol's log-probability entries, and qwen3.preprocess -> a fake thinker ->
// qwen3.decode on the tiny tokenizer (no model: the fake thinker answers a fixed text).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/client.h"
#include "models/builtin_families.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "pipeline/stage_args.h"
#include "pipeline/stage_factory.h"
#include "runner/pipeline_harness.h"
#include "serve/api/api_server.h"
#include "serve/http/test_client.h"
#include "text/tokenizer.h"

namespace omnirt::serve::api {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using omnirt::testing::Layout;
using omnirt::testing::start_pipeline;

std::string post(const std::string& path, const std::string& body,
                 const std::string& extra_headers = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" +
           extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The JSON events of an SSE body; `done` when it ended with [DONE].
struct Events {
    std::vector<json> events;
    bool done = false;
};
Events sse_events(const std::string& body) {
    Events out;
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        EXPECT_FALSE(out.done) << "an event after [DONE]";
        if (line == "data: [DONE]") {
            out.done = true;
            continue;
        }
        out.events.push_back(json::parse(line.substr(6)));
    }
    return out;
}

const char* const kStreamerYaml = R"(
name: streamer
model_path: none
stages:
  - name: only
    process: p
    factory: test.token_streamer
    factory_args: {tokens: 3}
    terminal: true
)";

const char* const kLogprobsYaml = R"(
name: logprobs
model_path: none
stages:
  - name: only
    process: p
    factory: test.api.logprob_streamer
    terminal: true
)";

// One entry of the client output protocol's "logprobs".
Value logprob_entry(const std::string& token, double logprob, std::vector<Value> top = {},
                    bool with_top = true) {
    List bytes;
    for (unsigned char c : token) bytes.emplace_back(static_cast<std::int64_t>(c));
    Map entry{{"token", Value(token)}, {"logprob", Value(logprob)}, {"bytes", Value(bytes)}};
    if (with_top) entry.emplace("top_logprobs", Value(List(top.begin(), top.end())));
    return Value(std::move(entry));
}

// test.api.logprob_streamer: the reply "Hé 🙂!" in three client chunks, each with the
// log probabilities of its tokens "H", "é" | " 🙂" | "!" (the last without alternatives).
Result<std::unique_ptr<pipeline::Scheduler>> logprob_streamer(
    const pipeline::StageContext& context) {
    return pipeline::make_simple_scheduler(
        context, [](const StagePayload& input, pipeline::Emitter& emit) -> Result<StagePayload> {
            const std::vector<Value> chunks = {
                Value(Map{{"text", Value("Hé")},
                          {"logprobs",
                           Value(List{
                               logprob_entry("H", -0.25,
                                             {logprob_entry("H", -0.25, {}, false),
                                              logprob_entry("J", -2.0, {}, false)}),
                               logprob_entry("é", -0.5, {logprob_entry("é", -0.5, {}, false)})})}}),
                Value(Map{{"text", Value(" \xF0\x9F\x99\x82")},
                          {"logprobs",
                           Value(List{logprob_entry(" \xF0\x9F\x99\x82", -0.125,
                                                    {logprob_entry(" \xF0\x9F\x99\x82", -0.125, {},
                                                                   false),
                                                     logprob_entry(" :)", -4.0, {}, false)})})}}),
                Value(Map{{"text", Value("!")},
                          {"logprobs", Value(List{logprob_entry("!", -1.0, {}, false)})}}),
            };
            for (const Value& chunk : chunks) {
                if (!emit.emit(chunk)) return fail(ErrorCode::aborted, "aborted");
            }
            return StagePayload{
                .request_id = input.request_id,
                .request = input.request,
                .data = Value(Map{{"text", Value("Hé \xF0\x9F\x99\x82!")},
                                  {"finish_reason", Value("length")},
                                  {"usage", Value(Map{{"prompt_tokens", Value(3)},
                                                      {"completion_tokens", Value(4)}})}})};
        });
}

constexpr const char* kFakeReply = "Hi there, friend!";

// test.api.fake_thinker: stands in for qwen3.thinker. Answers kFakeReply whatever the prompt,
// streaming each token of it ({"token_id", "text", and with request sampling.logprobs "logprob"
// and "top_logprobs" [the token, then <|im_end|>]}) to its stream_to stages; the result carries
// the usage (prompt_tokens = the input_ids it got) and output_ids.
Result<std::unique_ptr<pipeline::Scheduler>> fake_thinker(const pipeline::StageContext& context) {
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    OMNI_TRY(std::unique_ptr<text::Tokenizer> loaded,
             text::Tokenizer::from_file(model_path + "/tokenizer.json"));
    std::shared_ptr<const text::Tokenizer> tokenizer(std::move(loaded));
    return pipeline::make_simple_scheduler(
        context,
        [tokenizer, targets = context.stream_to](const StagePayload& input,
                                                 pipeline::Emitter& emit) -> Result<StagePayload> {
            const Value* input_ids = input.data.find("input_ids");
            if (input_ids == nullptr || input_ids->if_tensor() == nullptr) {
                return fail(ErrorCode::invalid_argument, "fake thinker: no input_ids tensor");
            }
            const Value* sampling = input.request.params.find("sampling");
            const Value* wants = sampling != nullptr ? sampling->find("logprobs") : nullptr;
            const bool logprobs = wants != nullptr && wants->is_bool() && wants->as_bool();
            const auto end = static_cast<std::int64_t>(models::qwen3::tiny_tokenizer_ids().im_end);
            OMNI_TRY(std::vector<text::TokenId> ids, tokenizer->encode(kFakeReply));
            List output_ids;
            for (std::size_t i = 0; i < ids.size(); ++i) {
                const std::int64_t id = ids[i];
                OMNI_TRY(std::string piece, tokenizer->decode(std::span(&ids[i], 1)));
                Map chunk{{"token_id", Value(id)},
                          {"index", Value(static_cast<std::int64_t>(i))},
                          {"text", Value(piece)}};
                if (logprobs) {
                    const double logprob = -0.5 - 0.25 * static_cast<double>(i);
                    chunk.emplace("logprob", Value(logprob));
                    chunk.emplace(
                        "top_logprobs",
                        Value(
                            List{Value(Map{{"token_id", Value(id)}, {"logprob", Value(logprob)}}),
                                 Value(Map{{"token_id", Value(end)}, {"logprob", Value(-8.0)}})}));
                }
                for (const std::string& target : targets) {
                    if (!emit.emit(Value(chunk), target)) {
                        return fail(ErrorCode::aborted, "aborted");
                    }
                }
                output_ids.emplace_back(id);
            }
            const std::int64_t prompt_tokens = input_ids->as_tensor().numel();
            const auto completion_tokens = static_cast<std::int64_t>(output_ids.size());
            return StagePayload{
                .request_id = input.request_id,
                .request = input.request,
                .data = Value(
                    Map{{"text", Value(kFakeReply)},
                        {"finish_reason", Value("stop")},
                        {"usage", Value(Map{{"prompt_tokens", Value(prompt_tokens)},
                                            {"completion_tokens", Value(completion_tokens)}})},
                        {"output_ids", Value(std::move(output_ids))},
                        {"internal", Value("not for the client")}})};
        });
}

Status register_test_factories() {
    for (auto& [name, factory, injectable] :
         {std::tuple{"test.api.logprob_streamer", pipeline::StageFactory(logprob_streamer),
                     std::vector<std::string>{}},
          std::tuple{"test.api.fake_thinker", pipeline::StageFactory(fake_thinker),
                     std::vector<std::string>{"model_path"}}}) {
        Status added =
            pipeline::register_stage_factory(name, factory, "api test stage", injectable);
        if (!added && added.error().code != ErrorCode::already_exists) return added;
    }
    return ok_status();
}

class CompletionTokenizeTest : public ::testing::Test {
  protected:
    // A private directory holding the tiny tokenizer's tokenizer.json (the qwen3 text stages'
    // model_path), and the tokenizer itself.
    static void SetUpTestSuite() {
        std::string pattern = (fs::temp_directory_path() / "omnirt_api_tokenize_XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        directory_ = new fs::path(pattern);
        std::ofstream(*directory_ / "tokenizer.json")
            << models::qwen3::tiny_tokenizer_files().tokenizer.dump();
        auto loaded = text::Tokenizer::from_file((*directory_ / "tokenizer.json").string());
        ASSERT_TRUE(loaded.has_value()) << loaded.error().to_string();
        tokenizer_ = new std::shared_ptr<const text::Tokenizer>(std::move(*loaded));
    }
    static void TearDownTestSuite() {
        if (directory_ != nullptr) fs::remove_all(*directory_);
        delete directory_;
        delete tokenizer_;
        directory_ = nullptr;
        tokenizer_ = nullptr;
    }

    void start(const std::string& yaml, ApiServerOptions options = {}) {
        ASSERT_TRUE(register_test_factories().has_value());
        auto pipeline = start_pipeline(yaml, Layout{});
        ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
        pipeline_ = std::move(*pipeline);
        client_ = std::make_unique<client::Client>(pipeline_->coordinator());
        if (options.model_name.empty()) options.model_name = "m";
        auto server = ApiServer::create(std::move(options), *client_);
        ASSERT_TRUE(server.has_value()) << server.error().to_string();
        server_ = std::move(*server);
        ASSERT_TRUE(server_->start().has_value());
    }
    // The tiny tokenizer's ApiServerOptions, with the Qwen3 family's chat template.
    static ApiServerOptions with_tokenizer() {
        ApiServerOptions options;
        options.tokenizer = *tokenizer_;
        options.max_model_len = 4096;
        auto family = models::builtin_families().find("qwen3");
        if (family) options.render_chat = (*family)->render_chat;
        return options;
    }
    // qwen3.preprocess -> test.api.fake_thinker -> qwen3.decode over the tiny tokenizer.
    static std::string qwen3_text_yaml() {
        return "name: qwen3-text\nmodel_path: " + directory_->string() + R"(
stages:
  - name: preprocess
    process: p
    factory: qwen3.preprocess
    next: [thinker]
  - name: thinker
    process: p
    factory: test.api.fake_thinker
    next: [decode]
    stream_to: [decode]
  - name: decode
    process: p
    factory: qwen3.decode
    terminal: true
)";
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (pipeline_) pipeline_->stop();
        server_.reset();
        client_.reset();
        pipeline_.reset();
    }

    // One POST on a fresh connection; the answer's status and body.
    std::pair<int, std::string> call(const std::string& path, const std::string& body,
                                     const std::string& extra_headers = "") {
        http::testing::Client client(server_->port());
        if (!client.send(post(path, body, extra_headers))) return {0, "send failed"};
        auto response = client.read_response();
        if (!response) return {0, "no response"};
        return {response->status, response->body};
    }
    // A 200 JSON answer.
    json ok(const std::string& path, const json& body) {
        auto [status, text] = call(path, body.dump());
        EXPECT_EQ(status, 200) << path << " " << body.dump() << " -> " << text;
        return status == 200 ? json::parse(text) : json();
    }
    // An error answer with `status`; its "error" object.
    json error(const std::string& path, const std::string& body, int status) {
        auto [got, text] = call(path, body);
        EXPECT_EQ(got, status) << path << " " << body << " -> " << text;
        auto parsed = json::parse(text, nullptr, false);
        EXPECT_TRUE(parsed.is_object() && parsed.contains("error")) << text;
        return parsed.is_object() && parsed.contains("error") ? parsed["error"] : json();
    }
    std::vector<std::int32_t> encode(const std::string& text) {
        auto ids = (*tokenizer_)->encode(text);
        EXPECT_TRUE(ids.has_value());
        return ids.value_or(std::vector<std::int32_t>{});
    }

    static fs::path* directory_;
    static std::shared_ptr<const text::Tokenizer>* tokenizer_;
    std::unique_ptr<runner::Pipeline> pipeline_;
    std::unique_ptr<client::Client> client_;
    std::unique_ptr<ApiServer> server_;
};

fs::path* CompletionTokenizeTest::directory_ = nullptr;
std::shared_ptr<const text::Tokenizer>* CompletionTokenizeTest::tokenizer_ = nullptr;

json completion_body(json prompt, json extra = json::object()) {
    json body = {{"model", "m"}, {"prompt", std::move(prompt)}};
    body.update(extra);
    return body;
}

json chat_body(const std::string& text, json extra = json::object()) {
    json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
    body.update(extra);
    return body;
}

TEST_F(CompletionTokenizeTest, CompletionOfAStreamingStage) {
    start(kStreamerYaml);
    const json body = ok("/v1/completions", completion_body("Say something"));
    EXPECT_EQ(body["object"], "text_completion");
    EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u) << body["id"];
    EXPECT_EQ(body["model"], "m");
    ASSERT_EQ(body["choices"].size(), 1u);
    EXPECT_EQ(body["choices"][0]["text"], "t0 t1 t2 ");
    EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(body["usage"]["total_tokens"], 0);
    // A prompt of token ids (nothing checks them against a vocabulary here).
    const json ids = ok("/v1/completions", completion_body({1, 2, 3}));
    EXPECT_EQ(ids["choices"][0]["text"], "t0 t1 t2 ");
}

TEST_F(CompletionTokenizeTest, CompletionStreamsDeltasThenFinishUsageAndDone) {
    start(kStreamerYaml);
    auto [status, text] =
        call("/v1/completions",
             completion_body("x", {{"stream", true}, {"stream_options", {{"include_usage", true}}}})
                 .dump());
    ASSERT_EQ(status, 200) << text;
    const Events sse = sse_events(text);
    ASSERT_TRUE(sse.done);
    ASSERT_EQ(sse.events.size(), 5u) << text;  // three deltas, the finish, the usage
    std::string streamed;
    const std::string id = sse.events[0]["id"];
    for (std::size_t i = 0; i < 3; ++i) {
        const json& event = sse.events[i];
        EXPECT_EQ(event["object"], "text_completion");
        EXPECT_EQ(event["id"], id);
        EXPECT_TRUE(event["usage"].is_null());
        EXPECT_TRUE(event["choices"][0]["finish_reason"].is_null());
        EXPECT_TRUE(event["choices"][0]["logprobs"].is_null());
        streamed += event["choices"][0]["text"].get<std::string>();
    }
    EXPECT_EQ(streamed, "t0 t1 t2 ");
    EXPECT_EQ(sse.events[3]["choices"][0]["text"], "");
    EXPECT_EQ(sse.events[3]["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(sse.events[4]["choices"], json::array());
    EXPECT_EQ(sse.events[4]["usage"]["total_tokens"], 0);

    // Without include_usage: no usage chunk, no usage fields.
    auto [plain_status, plain] =
        call("/v1/completions", completion_body("x", {{"stream", true}}).dump());
    ASSERT_EQ(plain_status, 200);
    const Events without = sse_events(plain);
    ASSERT_TRUE(without.done);
    ASSERT_EQ(without.events.size(), 4u);
    for (const json& event : without.events) EXPECT_FALSE(event.contains("usage"));
}

TEST_F(CompletionTokenizeTest, CompletionErrors) {
    start(kStreamerYaml);
    struct Case {
        json body;
        std::string param;
    };
    const std::vector<Case> cases = {
        {completion_body("x", {{"n", 2}}), "n"},
        {completion_body("x", {{"best_of", 2}}), "best_of"},
        {completion_body("x", {{"echo", true}}), "echo"},
        {completion_body("x", {{"suffix", "y"}}), "suffix"},
        {completion_body("x", {{"logprobs", 21}}), "logprobs"},
        {completion_body("x", {{"max_tokens", 0}}), "max_tokens"},
        {completion_body({"a", "b"}), "prompt"},
        {completion_body({1, -1}), "prompt[1]"},
        {completion_body({1, 0.5}), "prompt[1]"},
        {completion_body(""), "prompt"},
        {json{{"model", "m"}}, "prompt"},
    };
    for (const Case& c : cases) {
        const json error_object = error("/v1/completions", c.body.dump(), 400);
        EXPECT_EQ(error_object["param"], c.param) << c.body.dump();
        EXPECT_EQ(error_object["type"], "invalid_request_error");
    }
    EXPECT_EQ(error("/v1/completions", "{", 400)["param"], nullptr);
    EXPECT_EQ(
        error("/v1/completions", completion_body("x", {{"model", "other"}}).dump(), 404)["code"],
        "model_not_found");
    // The server still answers.
    EXPECT_EQ(ok("/v1/completions", completion_body("x"))["choices"][0]["text"], "t0 t1 t2 ");
}

TEST_F(CompletionTokenizeTest, CompletionLogprobsAreFourParallelArrays) {
    start(kLogprobsYaml);
    const json body = ok("/v1/completions", completion_body("x", {{"logprobs", 2}}));
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["text"], "Hé 🙂!");
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(body["usage"],
              json({{"prompt_tokens", 3}, {"completion_tokens", 4}, {"total_tokens", 7}}));
    const json& logprobs = choice["logprobs"];
    EXPECT_EQ(logprobs["tokens"], json({"H", "é", " 🙂", "!"}));
    EXPECT_EQ(logprobs["token_logprobs"], json({-0.25, -0.5, -0.125, -1.0}));
    EXPECT_EQ(logprobs["text_offset"], json({0, 1, 2, 4}));  // characters, not bytes
    EXPECT_EQ(logprobs["top_logprobs"],
              json::array({json{{"H", -0.25}, {"J", -2.0}}, json{{"é", -0.5}},
                           json{{" 🙂", -0.125}, {" :)", -4.0}}, json::object()}));
    // Not asked for: null, though the stage sent them.
    const json without = ok("/v1/completions", completion_body("x"));
    EXPECT_TRUE(without["choices"][0]["logprobs"].is_null());
}

TEST_F(CompletionTokenizeTest, StreamedCompletionLogprobsOffsetFromTheStartOfTheOutput) {
    start(kLogprobsYaml);
    auto [status, text] =
        call("/v1/completions", completion_body("x", {{"logprobs", 1}, {"stream", true}}).dump());
    ASSERT_EQ(status, 200) << text;
    const Events sse = sse_events(text);
    ASSERT_TRUE(sse.done);
    ASSERT_EQ(sse.events.size(), 4u) << text;
    EXPECT_EQ(sse.events[0]["choices"][0]["text"], "Hé");
    EXPECT_EQ(sse.events[0]["choices"][0]["logprobs"]["tokens"], json({"H", "é"}));
    EXPECT_EQ(sse.events[0]["choices"][0]["logprobs"]["text_offset"], json({0, 1}));
    EXPECT_EQ(sse.events[1]["choices"][0]["logprobs"]["tokens"], json({" 🙂"}));
    EXPECT_EQ(sse.events[1]["choices"][0]["logprobs"]["text_offset"], json({2}));
    EXPECT_EQ(sse.events[2]["choices"][0]["logprobs"]["token_logprobs"], json({-1.0}));
    EXPECT_EQ(sse.events[2]["choices"][0]["logprobs"]["text_offset"], json({4}));
    EXPECT_EQ(sse.events[3]["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(sse.events[3]["choices"][0]["logprobs"].is_null());
}

TEST_F(CompletionTokenizeTest, ChatLogprobs) {
    start(kLogprobsYaml);
    const json body =
        ok("/v1/chat/completions", chat_body("hi", {{"logprobs", true}, {"top_logprobs", 2}}));
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["message"]["content"], "Hé 🙂!");
    const json& content = choice["logprobs"]["content"];
    ASSERT_EQ(content.size(), 4u) << choice["logprobs"];
    EXPECT_EQ(content[0], json({{"token", "H"},
                                {"logprob", -0.25},
                                {"bytes", {72}},
                                {"top_logprobs",
                                 {{{"token", "H"}, {"logprob", -0.25}, {"bytes", {72}}},
                                  {{"token", "J"}, {"logprob", -2.0}, {"bytes", {74}}}}}}));
    EXPECT_EQ(content[1]["bytes"], json({195, 169}));
    EXPECT_EQ(content[2]["token"], " 🙂");
    EXPECT_EQ(content[2]["bytes"], json({32, 240, 159, 153, 130}));
    EXPECT_EQ(content[3]["top_logprobs"], json::array());
    // Not asked for: null.
    const json without = ok("/v1/chat/completions", chat_body("hi"));
    EXPECT_TRUE(without["choices"][0]["logprobs"].is_null());
    // top_logprobs without logprobs is the client's mistake.
    EXPECT_EQ(
        error("/v1/chat/completions", chat_body("hi", {{"top_logprobs", 2}}).dump(), 400)["param"],
        "top_logprobs");
}

TEST_F(CompletionTokenizeTest, StreamedChatCarriesLogprobsWithEachDelta) {
    start(kLogprobsYaml);
    auto [status, text] = call("/v1/chat/completions",
                               chat_body("hi", {{"logprobs", true}, {"stream", true}}).dump());
    ASSERT_EQ(status, 200) << text;
    const Events sse = sse_events(text);
    ASSERT_TRUE(sse.done);
    std::string content;
    std::vector<std::string> tokens;
    for (const json& event : sse.events) {
        const json& choice = event["choices"][0];
        if (choice["delta"].contains("role")) {
            EXPECT_TRUE(choice["logprobs"].is_null());
            continue;
        }
        if (!choice["finish_reason"].is_null()) {
            EXPECT_EQ(choice["finish_reason"], "length");
            continue;
        }
        content += choice["delta"]["content"].get<std::string>();
        ASSERT_TRUE(choice["logprobs"].is_object()) << event;
        for (const json& entry : choice["logprobs"]["content"]) tokens.push_back(entry["token"]);
    }
    EXPECT_EQ(content, "Hé 🙂!");
    EXPECT_EQ(tokens, (std::vector<std::string>{"H", "é", " 🙂", "!"}));
}

TEST_F(CompletionTokenizeTest, TokenizeNeedsATokenizer) {
    start(kStreamerYaml);
    for (const char* path : {"/tokenize", "/detokenize"}) {
        const json error_object = error(path, json{{"prompt", "x"}, {"tokens", {1}}}.dump(), 404);
        EXPECT_EQ(error_object["code"], "not_found") << path;
        EXPECT_NE(error_object["message"].get<std::string>().find("tokenizer"), std::string::npos);
    }
}

TEST_F(CompletionTokenizeTest, TheApiKeyGuardsCompletionsAndTheTokenizer) {
    ApiServerOptions options = with_tokenizer();
    options.api_key = "sekret";
    start(kStreamerYaml, std::move(options));
    const std::string completion = completion_body("x").dump();
    const std::string tokenize = json{{"prompt", "x"}}.dump();
    const std::string detokenize = json{{"tokens", {1}}}.dump();
    for (const auto& [path, body] :
         {std::pair{"/v1/completions", completion}, std::pair{"/tokenize", tokenize},
          std::pair{"/detokenize", detokenize}}) {
        EXPECT_EQ(error(path, body, 401)["code"], "invalid_api_key") << path;
        auto [wrong, wrong_body] = call(path, body, "Authorization: Bearer nope\r\n");
        EXPECT_EQ(wrong, 401) << path << " " << wrong_body;
        auto [status, text] = call(path, body, "Authorization: Bearer sekret\r\n");
        EXPECT_EQ(status, 200) << path << " " << text;
    }
}

TEST_F(CompletionTokenizeTest, TokenizeAPrompt) {
    start(kStreamerYaml, with_tokenizer());
    const std::string text = "Hello world, héllo 🙂";
    const std::vector<std::int32_t> expected = encode(text);
    ASSERT_FALSE(expected.empty());
    const json body = ok("/tokenize", {{"model", "m"}, {"prompt", text}});
    EXPECT_EQ(body["tokens"].get<std::vector<std::int32_t>>(), expected);
    EXPECT_EQ(body["count"], expected.size());
    EXPECT_EQ(body["max_model_len"], 4096);
    EXPECT_TRUE(body["token_strs"].is_null());
    // The model is optional; llama-server's names work too.
    const json pieces = ok("/tokenize", {{"content", text}, {"with_pieces", true}});
    EXPECT_EQ(pieces["tokens"], body["tokens"]);
    ASSERT_EQ(pieces["token_strs"].size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(pieces["token_strs"][i], std::string(*(*tokenizer_)->id_to_token(expected[i])));
    }
    const json strs = ok("/tokenize", {{"prompt", text}, {"return_token_strs", true}});
    EXPECT_EQ(strs["token_strs"], pieces["token_strs"]);
    // Special tokens in the text are the special tokens.
    const json special = ok("/tokenize", {{"prompt", "<|im_end|>"}, {"add_special_tokens", false}});
    EXPECT_EQ(special["tokens"], json({models::qwen3::tiny_tokenizer_ids().im_end}));
    const json empty = ok("/tokenize", {{"prompt", ""}});
    EXPECT_EQ(empty["count"], 0);
    EXPECT_EQ(empty["tokens"], json::array());
}

TEST_F(CompletionTokenizeTest, TokenizeChatMessages) {
    start(kStreamerYaml, with_tokenizer());
    const json messages = {{{"role", "system"}, {"content", "Be brief."}},
                           {{"role", "user"}, {"content", "Hi"}}};
    const std::string conversation =
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n";
    const json with_prompt = ok("/tokenize", {{"messages", messages}});
    EXPECT_EQ(with_prompt["tokens"].get<std::vector<std::int32_t>>(),
              encode(conversation + "<|im_start|>assistant\n"));
    const json without =
        ok("/tokenize", {{"messages", messages}, {"add_generation_prompt", false}});
    EXPECT_EQ(without["tokens"].get<std::vector<std::int32_t>>(), encode(conversation));
    // Media parts cannot be rendered by the text template.
    const json image = {
        {{"role", "user"},
         {"content",
          {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,aGk="}}}}}}}};
    EXPECT_EQ(error("/tokenize", json{{"messages", image}}.dump(), 400)["param"], "messages");
    EXPECT_EQ(
        error("/tokenize", json{{"prompt", "x"}, {"messages", messages}}.dump(), 400)["param"],
        "messages");
}

TEST_F(CompletionTokenizeTest, TokenizeChatMessagesNeedsAChatTemplate) {
    ApiServerOptions options = with_tokenizer();
    options.render_chat = nullptr;
    start(kStreamerYaml, std::move(options));
    const json messages = {{{"role", "user"}, {"content", "Hi"}}};
    const json error_object = error("/tokenize", json{{"messages", messages}}.dump(), 400);
    EXPECT_EQ(error_object["param"], "messages");
    EXPECT_NE(error_object["message"].get<std::string>().find("chat template"), std::string::npos);
    EXPECT_EQ(ok("/tokenize", {{"prompt", "Hi"}})["count"], encode("Hi").size());
}

TEST_F(CompletionTokenizeTest, DetokenizeRoundTrips) {
    start(kStreamerYaml, with_tokenizer());
    for (const std::string text : {"Hello world", "héllo wörld 🙂 你好",
                                   " spaces  and\nnewlines\t", "<|im_start|>user\nHi<|im_end|>"}) {
        const json tokens = ok("/tokenize", {{"prompt", text}})["tokens"];
        const json back = ok("/detokenize", {{"model", "m"}, {"tokens", tokens}});
        EXPECT_EQ(back, json({{"prompt", text}})) << text;
    }
    EXPECT_EQ(ok("/detokenize", {{"tokens", json::array()}}), json({{"prompt", ""}}));
}

TEST_F(CompletionTokenizeTest, DetokenizeErrors) {
    start(kStreamerYaml, with_tokenizer());
    const auto vocab = static_cast<std::int64_t>((*tokenizer_)->vocab_size());
    EXPECT_EQ(vocab, models::qwen3::kTinyTokenizerSize);
    json error_object = error("/detokenize", json{{"tokens", {1, 2, vocab}}}.dump(), 400);
    EXPECT_EQ(error_object["param"], "tokens[2]");
    EXPECT_NE(error_object["message"].get<std::string>().find("vocabulary"), std::string::npos);
    EXPECT_EQ(error("/detokenize", json{{"tokens", {2147483647}}}.dump(), 400)["param"],
              "tokens[0]");
    EXPECT_EQ(error("/detokenize", json{{"tokens", {0, -1}}}.dump(), 400)["param"], "tokens[1]");
    EXPECT_EQ(error("/detokenize", json{{"tokens", "1 2"}}.dump(), 400)["param"], "tokens");
    EXPECT_EQ(error("/detokenize", "{", 400)["param"], nullptr);
    EXPECT_EQ(error("/detokenize", json{{"model", "other"}, {"tokens", {1}}}.dump(), 404)["code"],
              "model_not_found");
    EXPECT_EQ(error("/tokenize", json{{"model", "other"}, {"prompt", "x"}}.dump(), 404)["code"],
              "model_not_found");
    EXPECT_EQ(error("/tokenize", json{{"prompt", 1}}.dump(), 400)["param"], "prompt");
    EXPECT_EQ(error("/tokenize", json::object().dump(), 400)["param"], "prompt");
    // The last id of the vocabulary is fine.
    EXPECT_TRUE(ok("/detokenize", {{"tokens", {vocab - 1}}})["prompt"].is_string());
}

TEST_F(CompletionTokenizeTest, Qwen3TextStagesAnswerChatWithLogprobs) {
    start(qwen3_text_yaml(), with_tokenizer());
    const json messages = {{{"role", "user"}, {"content", "Hi"}}};
    const json body =
        ok("/v1/chat/completions",
           {{"model", "m"}, {"messages", messages}, {"logprobs", true}, {"top_logprobs", 2}});
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["message"]["content"], kFakeReply);
    EXPECT_EQ(choice["finish_reason"], "stop");
    // The prompt the thinker got is what /tokenize says the messages are.
    const json tokenized = ok("/tokenize", {{"messages", messages}});
    EXPECT_EQ(body["usage"]["prompt_tokens"], tokenized["count"]);
    const std::vector<std::int32_t> reply = encode(kFakeReply);
    EXPECT_EQ(body["usage"]["completion_tokens"], reply.size());
    // decode turned the thinker's token ids into the strings and bytes of each token.
    const json& content = choice["logprobs"]["content"];
    ASSERT_EQ(content.size(), reply.size());
    std::string joined;
    for (std::size_t i = 0; i < reply.size(); ++i) {
        std::string bytes;
        ASSERT_TRUE((*tokenizer_)->append_token_bytes(reply[i], bytes).has_value());
        EXPECT_EQ(content[i]["token"], bytes);
        EXPECT_EQ(content[i]["bytes"], json(std::vector<std::uint8_t>(bytes.begin(), bytes.end())));
        EXPECT_EQ(content[i]["logprob"], -0.5 - 0.25 * static_cast<double>(i));
        ASSERT_EQ(content[i]["top_logprobs"].size(), 2u);
        EXPECT_EQ(content[i]["top_logprobs"][0]["token"], bytes);
        EXPECT_EQ(content[i]["top_logprobs"][1]["token"], "<|im_end|>");
        joined += content[i]["token"].get<std::string>();
    }
    EXPECT_EQ(joined, kFakeReply);
    // Without logprobs the thinker sends none and the answer has none.
    const json plain = ok("/v1/chat/completions", {{"model", "m"}, {"messages", messages}});
    EXPECT_EQ(plain["choices"][0]["message"]["content"], kFakeReply);
    EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST_F(CompletionTokenizeTest, Qwen3TextStagesAnswerCompletions) {
    start(qwen3_text_yaml(), with_tokenizer());
    const std::string prompt = "Once upon a time";
    const json body = ok("/v1/completions", completion_body(prompt, {{"logprobs", 1}}));
    EXPECT_EQ(body["choices"][0]["text"], kFakeReply);
    EXPECT_EQ(body["usage"]["prompt_tokens"], encode(prompt).size());  // no chat template
    const json& logprobs = body["choices"][0]["logprobs"];
    std::string joined;
    for (const json& token : logprobs["tokens"]) joined += token.get<std::string>();
    EXPECT_EQ(joined, kFakeReply);
    ASSERT_EQ(logprobs["text_offset"].size(), logprobs["tokens"].size());
    EXPECT_EQ(logprobs["text_offset"][0], 0);
    // Token ids as the prompt: as they are.
    const json ids = ok("/v1/completions", completion_body({5, 6, 7, 8}));
    EXPECT_EQ(ids["usage"]["prompt_tokens"], 4);
    // An id outside the vocabulary is refused by qwen3.preprocess, naming it.
    const json refused = error("/v1/completions",
                               completion_body({5, models::qwen3::kTinyTokenizerSize}).dump(), 400);
    EXPECT_NE(refused["message"].get<std::string>().find("inputs.prompt[1]"), std::string::npos)
        << refused;
    // Streaming: the deltas add up to the reply.
    auto [status, text] =
        call("/v1/completions", completion_body(prompt, {{"stream", true}}).dump());
    ASSERT_EQ(status, 200) << text;
    const Events sse = sse_events(text);
    ASSERT_TRUE(sse.done);
    std::string streamed;
    for (const json& event : sse.events) streamed += event["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(streamed, kFakeReply);
    EXPECT_EQ(sse.events.back()["choices"][0]["finish_reason"], "stop");
}

}  // namespace
}  // namespace omnirt::serve::api

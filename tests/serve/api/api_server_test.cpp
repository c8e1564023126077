// The OpenAI API server over a real pipeline (the demo stages, hosted in this process): answers,
// errors in OpenAI's shape, hostile bodies, the concurrency limit, client disconnects that abort
// the request in every stage, pipeline failures and an unhealthy pipeline.
#include "serve/api/api_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "client/client.h"
#include "runner/pipeline_harness.h"
#include "serve/http/test_client.h"
#include "support/command.h"

namespace omnirt::serve::api {
namespace {

using json = nlohmann::json;
using http::testing::Client;
using omnirt::testing::all_stages_idle;
using omnirt::testing::eventually;
using omnirt::testing::Layout;
using omnirt::testing::source_path;
using omnirt::testing::start_pipeline;

std::string read_file(const std::string& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

std::string post(const std::string& path, const std::string& body,
                 const std::string& extra_headers = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" +
           extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n"; }

std::string chat_body(const std::string& text, json extra = json::object()) {
    json body = {{"model", "demo"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
    body.update(extra);
    return body.dump();
}

class ApiServerTest : public ::testing::Test {
  protected:
    void start(ApiServerOptions options = {}, std::string yaml = "", Layout layout = {}) {
        if (yaml.empty()) yaml = read_file(source_path("configs/demo.yaml"));
        auto pipeline = start_pipeline(yaml, layout);
        ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
        pipeline_ = std::move(*pipeline);
        client_ = std::make_unique<client::Client>(pipeline_->coordinator());
        if (options.model_name.empty()) options.model_name = "demo";
        auto server = ApiServer::create(std::move(options), *client_);
        ASSERT_TRUE(server.has_value()) << server.error().to_string();
        server_ = std::move(*server);
        ASSERT_TRUE(server_->start().has_value());
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (pipeline_) pipeline_->stop();
        server_.reset();
        client_.reset();
        pipeline_.reset();
    }

    // One request on a fresh connection.
    std::optional<http::testing::Response> call(const std::string& raw) {
        Client client(server_->port());
        if (!client.send(raw)) return std::nullopt;
        return client.read_response();
    }
    static json error_of(const http::testing::Response& response) {
        return json::parse(response.body)["error"];
    }

    std::unique_ptr<runner::Pipeline> pipeline_;
    std::unique_ptr<client::Client> client_;
    std::unique_ptr<ApiServer> server_;
};

TEST_F(ApiServerTest, ChatAnswersWithTextAndUsage) {
    start();
    auto response = call(post("/v1/chat/completions", chat_body("hello there")));
    ASSERT_TRUE(response);
    ASSERT_EQ(response->status, 200) << response->body;
    auto body = json::parse(response->body);
    EXPECT_EQ(body["object"], "chat.completion");
    EXPECT_EQ(body["model"], "demo");
    EXPECT_EQ(body["choices"][0]["message"]["content"], "You said: hello there.");
    EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(body["usage"]["prompt_tokens"], 2);
    EXPECT_EQ(body["usage"]["completion_tokens"], 4);
    EXPECT_EQ(body["usage"]["total_tokens"], 6);
    EXPECT_FALSE(body["choices"][0]["message"].contains("audio"));
}

TEST_F(ApiServerTest, ChatStreamsDeltasThenFinishUsageAndDone) {
    start();
    json extra = {
        {"stream", true}, {"stream_options", {{"include_usage", true}}}, {"max_tokens", 3}};
    auto response = call(post("/v1/chat/completions", chat_body("one two three", extra)));
    ASSERT_TRUE(response);
    ASSERT_EQ(response->status, 200);
    EXPECT_EQ(response->headers["content-type"], "text/event-stream");
    std::string text;
    std::vector<json> events;
    std::istringstream lines(response->body);
    bool done = false;
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        if (line == "data: [DONE]") {
            done = true;
            continue;
        }
        events.push_back(json::parse(line.substr(6)));
    }
    ASSERT_TRUE(done);
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
    for (const auto& event : events) {
        if (event["choices"].empty()) continue;
        const auto& delta = event["choices"][0]["delta"];
        if (delta.contains("content")) text += delta["content"].get<std::string>();
    }
    EXPECT_EQ(text, "You said: one");
    EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(events.back()["usage"]["completion_tokens"], 3);
}

TEST_F(ApiServerTest, ChatWithAudioCarriesAWavFileAndATranscript) {
    start();
    json extra = {{"modalities", {"text", "audio"}},
                  {"audio", {{"voice", "alloy"}, {"format", "wav"}}}};
    auto response = call(post("/v1/chat/completions", chat_body("hi", extra)));
    ASSERT_TRUE(response);
    ASSERT_EQ(response->status, 200) << response->body;
    auto message = json::parse(response->body)["choices"][0]["message"];
    EXPECT_EQ(message["content"], "You said: hi.");
    EXPECT_EQ(message["audio"]["transcript"], "You said: hi.");
    std::string data = message["audio"]["data"];
    EXPECT_EQ(data.substr(0, 4), "UklG");  // "RIF" in base64
    EXPECT_GT(data.size(), 1000u);
}

TEST_F(ApiServerTest, SpeechInEveryFormatWithItsContentType) {
    start();
    for (auto [format, type] : {std::pair{"wav", "audio/wav"}, std::pair{"pcm", "audio/pcm"},
                                std::pair{"flac", "audio/flac"}, std::pair{"opus", "audio/ogg"}}) {
        json body = {{"model", "demo"}, {"input", "hello world"}, {"response_format", format}};
        auto response = call(post("/v1/audio/speech", body.dump()));
        ASSERT_TRUE(response);
        ASSERT_EQ(response->status, 200) << format << ": " << response->body;
        EXPECT_EQ(response->headers["content-type"], type);
        EXPECT_GT(response->body.size(), 100u) << format;
    }
    json bad = {{"model", "demo"}, {"input", "x"}, {"response_format", "m4a"}};
    auto refused = call(post("/v1/audio/speech", bad.dump()));
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400);
    EXPECT_EQ(error_of(*refused)["param"], "response_format");
}

TEST_F(ApiServerTest, AuthModelAndRouteErrorsHaveTheOpenAIShape) {
    start({.api_key = "sekret"});
    auto missing = call(post("/v1/chat/completions", chat_body("x")));
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 401);
    EXPECT_EQ(error_of(*missing)["code"], "invalid_api_key");
    auto wrong =
        call(post("/v1/chat/completions", chat_body("x"), "Authorization: Bearer nope\r\n"));
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401);
    auto models = call(get("/v1/models"));
    ASSERT_TRUE(models);
    EXPECT_EQ(models->status, 401);
    const std::string auth = "Authorization: Bearer sekret\r\n";
    auto other_model =
        call(post("/v1/chat/completions", chat_body("x", {{"model", "gpt-4o"}}), auth));
    ASSERT_TRUE(other_model);
    EXPECT_EQ(other_model->status, 404);
    EXPECT_EQ(error_of(*other_model)["code"], "model_not_found");
    auto route = call(get("/v1/nothing"));
    ASSERT_TRUE(route);
    EXPECT_EQ(route->status, 404);
    EXPECT_TRUE(error_of(*route).contains("message"));
    auto method = call(get("/v1/chat/completions"));
    ASSERT_TRUE(method);
    EXPECT_EQ(method->status, 405);
    // Health and metrics stay open for probes.
    auto health = call(get("/health"));
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(json::parse(health->body)["status"], "ok");
    EXPECT_EQ(json::parse(health->body)["stages"].size(), 3u);
    auto live = call(get("/health/live"));
    ASSERT_TRUE(live);
    EXPECT_EQ(live->status, 200);
    EXPECT_EQ(live->body, R"({"status":"live"})");
}

TEST_F(ApiServerTest, VoicesListTheOptionsVoicesBehindTheKey) {
    start({.api_key = "sekret", .voices = {"aiden", "ethan"}});
    auto missing = call(get("/v1/audio/voices"));
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 401);
    auto voices = call(
        "GET /v1/audio/voices HTTP/1.1\r\nHost: t\r\n"
        "Authorization: Bearer sekret\r\n\r\n");
    ASSERT_TRUE(voices);
    ASSERT_EQ(voices->status, 200) << voices->body;
    EXPECT_EQ(voices->headers["content-type"], "application/json");
    EXPECT_EQ(json::parse(voices->body),
              json::parse(R"({"voices": [{"id": "aiden", "name": "aiden", "kind": "preset"},
                                         {"id": "ethan", "name": "ethan", "kind": "preset"}]})"));
    // Presets are checked for speech too: another voice is a 400 on `voice`.
    json body = {{"model", "demo"}, {"input", "hi"}, {"voice", "nova"}};
    auto refused = call(post("/v1/audio/speech", body.dump(), "Authorization: Bearer sekret\r\n"));
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << refused->body;
    EXPECT_EQ(error_of(*refused)["param"], "voice");
}

// With time_stretch_speech the server applies `speed` (the pipeline is asked for speed 1):
// exactly round(samples / speed), whole or streamed; speed 1 leaves the bytes as they were.
TEST_F(ApiServerTest, ServerTimeStretchesSpeech) {
    start({.time_stretch_speech = true});
    auto speech = [&](json extra) {
        json body = {{"model", "demo"}, {"input", "hello world"}, {"response_format", "pcm"}};
        body.update(extra);
        auto response = call(post("/v1/audio/speech", body.dump()));
        EXPECT_TRUE(response);
        EXPECT_EQ(response->status, 200) << response->body;
        return response->body;
    };
    const std::string plain = speech(json::object());
    const std::size_t samples = plain.size() / 2;
    EXPECT_EQ(speech({{"speed", 1.0}}), plain);
    EXPECT_EQ(speech({{"speed", 2.0}}).size() / 2,
              static_cast<std::size_t>(std::llround(samples / 2.0)));
    EXPECT_EQ(speech({{"speed", 0.5}}).size() / 2, samples * 2);
    EXPECT_EQ(speech({{"speed", 2.0}, {"stream_format", "audio"}}).size() / 2,
              static_cast<std::size_t>(std::llround(samples / 2.0)));
}

TEST_F(ApiServerTest, ThePlaygroundIsPublicWithItsContentTypes) {
    start({.api_key = "sekret"});
    auto page = call(get("/"));
    ASSERT_TRUE(page);
    ASSERT_EQ(page->status, 200);
    EXPECT_EQ(page->headers["content-type"], "text/html; charset=utf-8");
    EXPECT_EQ(page->headers["cache-control"], "no-cache");
    EXPECT_NE(page->headers["content-security-policy"].find("default-src 'self'"),
              std::string::npos);
    EXPECT_NE(page->body.find("/playground/app.js"), std::string::npos);
    auto script = call(get("/playground/app.js"));
    ASSERT_TRUE(script);
    EXPECT_EQ(script->status, 200);
    EXPECT_EQ(script->headers["content-type"], "text/javascript; charset=utf-8");
    EXPECT_EQ(script->headers.count("content-security-policy"), 0u);
    auto missing = call(get("/playground/nothing.js"));
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
}

TEST_F(ApiServerTest, HostileBodiesGetA400AndTheServerStaysUp) {
    start();
    struct Case {
        std::string body;
        std::string param;  // "" when the error is not about one field
    };
    std::vector<Case> cases = {
        {"", ""},
        {"{", ""},
        {"[1,2]", ""},
        {std::string(100, '[') + std::string(100, ']'), ""},
        {"{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", ""},
        {chat_body("x", {{"temperature", 5}}), "temperature"},
        {chat_body("x", {{"n", 2}}), "n"},
        {chat_body("x", {{"max_tokens", "many"}}), "max_tokens"},
        {chat_body("x", {{"max_tokens", 1e300}}), "max_tokens"},
        {"{\"model\":\"demo\",\"messages\":[]}", "messages"},
        {chat_body("x", {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), ""},
    };
    for (const auto& c : cases) {
        auto response = call(post("/v1/chat/completions", c.body));
        ASSERT_TRUE(response) << c.body.substr(0, 40);
        EXPECT_EQ(response->status, 400) << c.body.substr(0, 60) << " -> " << response->body;
        auto error = error_of(*response);
        EXPECT_EQ(error["type"], "invalid_request_error");
        if (!c.param.empty()) {
            EXPECT_EQ(error["param"], c.param) << response->body;
        }
    }
    {
        // A truncated body: the connection closes, nothing else happens.
        Client client(server_->port());
        std::string raw = post("/v1/chat/completions", chat_body("x"));
        ASSERT_TRUE(client.send(raw.substr(0, raw.size() - 5)));
    }
    auto after = call(post("/v1/chat/completions", chat_body("still here")));
    ASSERT_TRUE(after);
    EXPECT_EQ(after->status, 200);
}

TEST_F(ApiServerTest, BodiesOverTheLimitAre413) {
    ApiServerOptions options;
    options.limits.max_body_bytes = 4096;
    start(std::move(options));
    auto response = call(post("/v1/chat/completions", chat_body(std::string(8000, 'a'))));
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 413);
}

TEST_F(ApiServerTest, ConcurrencyLimitAndDisconnectAbortEveryStage) {
    start({.max_concurrency = 1});
    json slow = {{"stream", true}, {"stage_params", {{"thinker", {{"token_delay_ms", 10000}}}}}};
    {
        Client streaming(server_->port());
        ASSERT_TRUE(streaming.send(post("/v1/chat/completions", chat_body("a b c d", slow))));
        ASSERT_TRUE(streaming.read_until("\"content\":\"You \""));  // the first delta arrived
        auto refused = call(post("/v1/chat/completions", chat_body("x")));
        ASSERT_TRUE(refused);
        EXPECT_EQ(refused->status, 429);
        EXPECT_EQ(error_of(*refused)["type"], "rate_limit_error");
        ASSERT_TRUE(eventually([&] { return !all_stages_idle(*pipeline_); }));
    }  // the client goes away mid-stream
    ASSERT_TRUE(eventually([&] {
        return pipeline_->health().requests_by_state["aborted"] == 1 && all_stages_idle(*pipeline_);
    }));
    EXPECT_EQ(client_->live_requests(), 0u);
    ASSERT_TRUE(eventually([&] { return server_->metrics().in_flight() == 0; }));
    auto again = call(post("/v1/chat/completions", chat_body("free again")));
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 200);
}

TEST_F(ApiServerTest, BeyondTheSlotsRequestsQueueThenGet429WithRetryAfter) {
    start({.max_concurrency = 1, .max_queue = 1});
    json slow = {{"stream", true}, {"stage_params", {{"thinker", {{"token_delay_ms", 10000}}}}}};
    auto holder = std::make_unique<Client>(server_->port());
    ASSERT_TRUE(holder->send(post("/v1/chat/completions", chat_body("a b c d", slow))));
    ASSERT_TRUE(holder->read_until("\"content\":\"You \""));  // it holds the only slot
    // A waiting client that leaves gives its place up.
    {
        Client leaving(server_->port());
        ASSERT_TRUE(leaving.send(post("/v1/chat/completions", chat_body("x"))));
        ASSERT_TRUE(eventually([&] { return server_->metrics().queued() == 1; }));
    }
    ASSERT_TRUE(eventually([&] { return server_->metrics().queued() == 0; }));
    Client waiting(server_->port());
    ASSERT_TRUE(waiting.send(post("/v1/chat/completions", chat_body("queued"))));
    ASSERT_TRUE(eventually([&] { return server_->metrics().queued() == 1; }));
    // The queue is full: 429 with a Retry-After.
    auto refused = call(post("/v1/chat/completions", chat_body("too many")));
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 429);
    EXPECT_EQ(error_of(*refused)["code"], "rate_limit_exceeded");
    ASSERT_EQ(refused->headers.count("retry-after"), 1u);
    const int retry = std::stoi(refused->headers["retry-after"]);
    EXPECT_GE(retry, 1);
    EXPECT_LE(retry, 60);
    // The slot holder goes away: the waiting request runs and is answered.
    holder.reset();
    auto answer = waiting.read_response();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, 200);
    EXPECT_NE(answer->body.find("You said: queued."), std::string::npos);
    ASSERT_TRUE(eventually(
        [&] { return server_->metrics().in_flight() == 0 && server_->metrics().queued() == 0; }));
}

TEST_F(ApiServerTest, APipelineFailureIsA500WithTheStagesMessage) {
    start({.model_name = "failing"}, R"(
name: failing
model_path: none
stages:
  - name: only
    process: p
    factory: test.fail
    factory_args: {always: true, message: "the model ran out of memory"}
    terminal: true
)");
    auto response = call(post("/v1/chat/completions", chat_body("x", {{"model", "failing"}})));
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 500);
    auto error = error_of(*response);
    EXPECT_EQ(error["type"], "server_error");
    EXPECT_NE(error["message"].get<std::string>().find("stage 'only'"), std::string::npos);
    EXPECT_NE(error["message"].get<std::string>().find("out of memory"), std::string::npos);
    json stream = {{"model", "failing"}, {"stream", true}};
    auto streamed = call(post("/v1/chat/completions", chat_body("x", stream)));
    ASSERT_TRUE(streamed);
    EXPECT_NE(streamed->body.find("\"error\""), std::string::npos);
    EXPECT_NE(streamed->body.find("out of memory"), std::string::npos);
}

TEST_F(ApiServerTest, AStoppedPipelineMakesRequestsAndHealth503) {
    start();
    pipeline_->stop();
    auto response = call(post("/v1/chat/completions", chat_body("x")));
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 503);
    auto health = call(get("/health"));
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 503);
    EXPECT_EQ(json::parse(health->body)["status"], "unhealthy");
    auto live = call(get("/health/live"));
    ASSERT_TRUE(live);
    EXPECT_EQ(live->status, 503);
    EXPECT_EQ(json::parse(live->body)["status"], "failed");
    EXPECT_EQ(json::parse(live->body)["reason"], "coordinator stopped");
}

TEST_F(ApiServerTest, HealthAndMetricsShowARestartingStage) {
    // An hour of back-off: the talker stays `restarting` while the test looks.
    std::string yaml = read_file(source_path("configs/demo.yaml")) +
                       "\nrestart: {backoff_initial_ms: 3600000, backoff_max_ms: 3600000}\n";
    start({}, yaml, Layout{runner::Placement::processes, false, "processes"});
    ASSERT_EQ(::kill(pipeline_->process_ids().at("talker"), SIGKILL), 0);
    ASSERT_TRUE(eventually([&] {
        for (const auto& stage : pipeline_->health().stages) {
            if (stage.stage == "talker") return stage.state == pipeline::StageState::restarting;
        }
        return false;
    }));

    auto health = call(get("/health"));
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 503);
    auto body = json::parse(health->body);
    EXPECT_EQ(body["status"], "unhealthy");
    EXPECT_NE(body["reason"].get<std::string>().find("stage 'talker' is restarting"),
              std::string::npos)
        << health->body;
    for (const auto& stage : body["stages"]) {
        bool talker = stage["name"] == "talker";
        EXPECT_EQ(stage["state"], talker ? "restarting" : "running") << health->body;
        EXPECT_EQ(stage["restarts"], talker ? 1 : 0) << health->body;
    }
    // Being healed: live for a liveness probe.
    auto live = call(get("/health/live"));
    ASSERT_TRUE(live);
    EXPECT_EQ(live->status, 200) << live->body;
    EXPECT_EQ(json::parse(live->body)["status"], "live");
    auto metrics = call(get("/metrics"));
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("# TYPE omnirt_stage_restarts_total counter"), std::string::npos);
    EXPECT_NE(metrics->body.find("omnirt_stage_restarts_total{stage=\"talker\"} 1"),
              std::string::npos)
        << metrics->body;
    EXPECT_NE(metrics->body.find("omnirt_stage_state{stage=\"talker\",state=\"restarting\"} 1"),
              std::string::npos);
    EXPECT_NE(metrics->body.find("omnirt_stage_state{stage=\"thinker\",state=\"running\"} 1"),
              std::string::npos);
    // A text answer never passes through the talker: it is served meanwhile.
    auto text = call(post("/v1/chat/completions", chat_body("still here")));
    ASSERT_TRUE(text);
    EXPECT_EQ(text->status, 200) << text->body;
}

TEST_F(ApiServerTest, HealthIsDegradedWhileAReplicaRestartsAndEveryRequestIsServed) {
    // The demo's thinker process as two replicas; an hour of back-off keeps r1 restarting.
    std::string yaml = read_file(source_path("configs/demo.yaml")) +
                       "\nrestart: {backoff_initial_ms: 3600000, backoff_max_ms: 3600000}\n";
    for (const char* stage : {"name: thinker\n", "name: decode\n"}) {
        yaml.insert(yaml.find(stage) + std::string(stage).size(), "    replicas: 2\n");
    }
    start({}, yaml, Layout{runner::Placement::processes, false, "processes"});
    ASSERT_EQ(::kill(pipeline_->process_ids().at("thinker.r1"), SIGKILL), 0);
    ASSERT_TRUE(eventually([&] {
        for (const auto& stage : pipeline_->health().stages) {
            if (stage.stage == "thinker.r1") return stage.state == pipeline::StageState::restarting;
        }
        return false;
    }));
    auto health = call(get("/health"));
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200) << health->body;
    auto body = json::parse(health->body);
    EXPECT_EQ(body["status"], "degraded");
    EXPECT_NE(body["reason"].get<std::string>().find("stage 'decode.r1' is restarting"),
              std::string::npos)
        << health->body;
    int replicas = 0;
    for (const auto& stage : body["stages"]) {
        if (!stage.contains("replica_of")) continue;
        ++replicas;
        bool down = stage["replica"] == 1;
        EXPECT_EQ(stage["state"], down ? "restarting" : "running") << health->body;
    }
    EXPECT_EQ(replicas, 4);  // thinker.r0, thinker.r1, decode.r0, decode.r1
    auto metrics = call(get("/metrics"));
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("omnirt_stage_state{stage=\"thinker.r1\",state=\"restarting\"} 1"),
              std::string::npos)
        << metrics->body;
    // Every user is served by the replica that runs, text and audio alike.
    for (const std::string user : {"alice", "bob", "carol", "dave"}) {
        auto text = call(post("/v1/chat/completions", chat_body("hi " + user, {{"user", user}})));
        ASSERT_TRUE(text);
        ASSERT_EQ(text->status, 200) << text->body;
        EXPECT_EQ(json::parse(text->body)["choices"][0]["message"]["content"],
                  "You said: hi " + user + ".");
    }
}

TEST_F(ApiServerTest, MetricsCountRequestsAndLatencies) {
    start();
    ASSERT_TRUE(call(post("/v1/chat/completions", chat_body("x"))));
    ASSERT_TRUE(call(post("/v1/chat/completions", "{")));
    auto metrics = call(get("/metrics"));
    ASSERT_TRUE(metrics);
    ASSERT_EQ(metrics->status, 200);
    const std::string& text = metrics->body;
    EXPECT_NE(
        text.find("omnirt_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1"),
        std::string::npos)
        << text;
    EXPECT_NE(
        text.find("omnirt_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1"),
        std::string::npos);
    EXPECT_NE(text.find("omnirt_time_to_first_token_seconds_count 1"), std::string::npos);
    EXPECT_NE(text.find("omnirt_stage_queue_depth{stage=\"thinker\"}"), std::string::npos);
    EXPECT_NE(text.find("le=\"+Inf\""), std::string::npos);
    EXPECT_NE(text.find("omnirt_stage_compute_seconds_total{stage=\"thinker\"}"),
              std::string::npos);
    EXPECT_NE(text.find("# TYPE omnirt_relay_bytes_total counter"), std::string::npos);
    EXPECT_NE(text.find("omnirt_pipeline_requests_total{state=\"completed\"}"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::serve::api

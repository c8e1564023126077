// /v1/audio/speech over the demo pipeline (hosted in this process): AAC answers decoded back with
// FFmpeg, whole and streamed, and the order of streamed audio when several streamed requests
// (time-stretched and encoded on the work pool) run at once.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <thread>

#include "client/client.h"
#include "media/ffmpeg_audio.h"
#include "media/test_audio.h"
#include "runner/pipeline_harness.h"
#include "serve/api/api_server.h"
#include "serve/http/test_client.h"
#include "serve/openai/base64.h"
#include "support/command.h"

namespace omnirt::serve::api {
namespace {

using json = nlohmann::json;
using media::testing::adts_frame_lengths;
using media::testing::as_bytes;
using media::testing::decode_adts_frames;
using media::testing::rms;
using omnirt::testing::source_path;
using omnirt::testing::start_pipeline;

constexpr int kDemoRate = 24000;

std::string speech_post(json body) {
    body["model"] = "demo";
    const std::string text = body.dump();
    return "POST /v1/audio/speech HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(text.size()) + "\r\n\r\n" + text;
}

// The audio of an SSE speech answer: every speech.audio.delta decoded, in order.
std::vector<std::string> sse_audio_pieces(const std::string& body) {
    std::vector<std::string> pieces;
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        const json event = json::parse(line.substr(6));
        if (event["type"] != "speech.audio.delta") continue;
        auto bytes = openai::base64_decode(event["audio"].get<std::string>());
        EXPECT_TRUE(bytes.has_value());
        pieces.emplace_back(bytes->begin(), bytes->end());
    }
    return pieces;
}

class SpeechStreamTest : public ::testing::Test {
  protected:
    void start(ApiServerOptions options = {}) {
        std::ifstream file(source_path("configs/demo.yaml"));
        std::stringstream yaml;
        yaml << file.rdbuf();
        auto pipeline = start_pipeline(yaml.str(), {});
        ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
        pipeline_ = std::move(*pipeline);
        client_ = std::make_unique<client::Client>(pipeline_->coordinator());
        options.model_name = "demo";
        auto server = ApiServer::create(std::move(options), *client_);
        ASSERT_TRUE(server.has_value()) << server.error().to_string();
        server_ = std::move(*server);
        ASSERT_TRUE(server_->start().has_value());
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (pipeline_) pipeline_->stop();
    }

    http::testing::Response speech(json body) {
        http::testing::Client client(server_->port());
        EXPECT_TRUE(client.send(speech_post(std::move(body))));
        auto response = client.read_response();
        EXPECT_TRUE(response.has_value());
        return response.value_or(http::testing::Response{});
    }

    std::unique_ptr<runner::Pipeline> pipeline_;
    std::unique_ptr<client::Client> client_;
    std::unique_ptr<ApiServer> server_;
};

TEST_F(SpeechStreamTest, AacWholeSseAndRawStreamsDecodeToTheSpeech) {
    if (!media::format_available(media::AudioFormat::aac)) GTEST_SKIP() << "no AAC encoder";
    start();
    const json request = {{"input", "hello there, how are you"}};
    json as_pcm = request;
    as_pcm["response_format"] = "pcm";
    const auto pcm = speech(as_pcm);
    ASSERT_EQ(pcm.status, 200) << pcm.body;
    const auto frames = static_cast<std::int64_t>(pcm.body.size() / 2);
    ASSERT_GT(frames, kDemoRate / 10);

    json as_aac = request;
    as_aac["response_format"] = "aac";
    const auto whole = speech(as_aac);
    ASSERT_EQ(whole.status, 200) << whole.body;
    EXPECT_EQ(whole.headers.at("content-type"), "audio/aac");
    auto decoded = decode_adts_frames(as_bytes(whole.body));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_EQ(decoded->sample_rate, kDemoRate);
    EXPECT_EQ(decoded->channels, 1);
    // 1024 frames of priming, then the speech, padded to a whole AAC frame.
    EXPECT_GE(decoded->frames(), frames + 1024);
    EXPECT_LT(decoded->frames(), frames + 1024 + 2048);
    EXPECT_GT(rms(decoded->samples), 0.01);

    // Streamed: every SSE delta is whole ADTS frames, and the deltas together are the same
    // stream as the whole answer; the raw stream is those bytes too.
    as_aac["stream"] = true;
    const auto sse = speech(as_aac);
    ASSERT_EQ(sse.status, 200) << sse.body;
    const auto pieces = sse_audio_pieces(sse.body);
    ASSERT_GE(pieces.size(), 2u);
    std::string joined;
    for (const std::string& piece : pieces) {
        EXPECT_FALSE(adts_frame_lengths(as_bytes(piece)).empty());
        joined += piece;
    }
    EXPECT_EQ(joined, whole.body);
    as_aac.erase("stream");
    as_aac["stream_format"] = "audio";
    const auto raw = speech(as_aac);
    ASSERT_EQ(raw.status, 200);
    EXPECT_EQ(raw.headers.at("content-type"), "audio/aac");
    EXPECT_EQ(raw.body, whole.body);
}

TEST_F(SpeechStreamTest, UnknownAndHostileFormatsAreA400OnResponseFormat) {
    start();
    for (const json& format :
         {json("m4a"), json("AAC"), json("aac "), json(std::string("aac\0", 4)),
          json(std::string(300, 'a')), json(7), json(nullptr)}) {
        const auto response = speech({{"input", "x"}, {"response_format", format}});
        if (format.is_null()) {  // null is "not given": the default (wav)
            EXPECT_EQ(response.status, 200);
            continue;
        }
        ASSERT_EQ(response.status, 400) << format.dump() << " " << response.body;
        EXPECT_EQ(json::parse(response.body)["error"]["param"], "response_format");
    }
}

// --speech-sse sglang: SGLang-Omni's events, read as its benchmark client reads them: each
// audio.data a whole WAV whose duration is (bytes - 44) / (rate * 2), the durations adding up to
// the whole answer's; the last event's usage with engine_time_s; then [DONE].
TEST_F(SpeechStreamTest, SglangSseEventsCarryWholeFilesAndTheUsage) {
    start({.sglang_speech_sse = true});
    const json request = {{"input", "hello there, how are you"}, {"response_format", "wav"}};
    const auto whole = speech(request);
    ASSERT_EQ(whole.status, 200) << whole.body;
    const double whole_seconds = static_cast<double>(whole.body.size() - 44) / (kDemoRate * 2);
    json streamed_request = request;
    streamed_request["stream"] = true;
    const auto streamed = speech(streamed_request);
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    std::vector<json> events;
    bool done = false;
    std::istringstream lines(streamed.body);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        EXPECT_FALSE(done) << "an event after [DONE]";
        if (line == "data: [DONE]") {
            done = true;
            continue;
        }
        events.push_back(json::parse(line.substr(6)));
    }
    ASSERT_TRUE(done);
    ASSERT_GE(events.size(), 3u);
    double seconds = 0;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        const json& event = events[i];
        EXPECT_EQ(event["object"], "audio.speech.chunk");
        EXPECT_EQ(event["index"], i);
        EXPECT_TRUE(event["finish_reason"].is_null());
        EXPECT_EQ(event["audio"]["format"], "wav");
        EXPECT_EQ(event["audio"]["sample_rate"], kDemoRate);
        auto file = openai::base64_decode(event["audio"]["data"].get<std::string>());
        ASSERT_TRUE(file.has_value());
        ASSERT_GT(file->size(), 44u);
        EXPECT_EQ(std::string(file->begin(), file->begin() + 4), "RIFF");
        seconds += static_cast<double>(file->size() - 44) / (kDemoRate * 2);
    }
    EXPECT_NEAR(seconds, whole_seconds, 1e-9);
    const json& last = events.back();
    EXPECT_TRUE(last["audio"].is_null());
    EXPECT_EQ(last["finish_reason"], "stop");
    EXPECT_EQ(last["index"], events.size() - 1);
    EXPECT_GT(last["usage"]["prompt_tokens"].get<int>(), 0);
    EXPECT_GT(last["usage"]["completion_tokens"].get<int>(), 0);
    EXPECT_GT(last["usage"]["engine_time_s"].get<double>(), 0.0);
}

// Eight streamed requests at once, time-stretched (speed 1.5) and encoded on a pool of four
// threads: each gets exactly the bytes it gets alone, so no chunk of a request overtook another.
TEST_F(SpeechStreamTest, ConcurrentStreamsKeepTheirChunkOrder) {
    start({.worker_threads = 4, .time_stretch_speech = true});
    const bool with_aac = media::format_available(media::AudioFormat::aac);
    auto request_of = [&](int i) {
        std::string text = "request " + std::to_string(i);
        for (int word = 0; word < 12; ++word) text += " w" + std::to_string(i * 100 + word);
        json body = {{"input", text},
                     {"speed", 1.5},
                     {"stage_params", {{"thinker", {{"token_delay_ms", 1}}}}}};
        if (i % 2 == 0) {
            body["stream_format"] = "audio";
            body["response_format"] = "pcm";
        } else {
            body["stream"] = true;
            body["response_format"] = with_aac ? "aac" : "wav";
        }
        return body;
    };
    auto audio_of = [](const json& body, const http::testing::Response& response) {
        if (!body.contains("stream")) return response.body;
        std::string joined;
        for (const std::string& piece : sse_audio_pieces(response.body)) joined += piece;
        return joined;
    };
    constexpr int kRequests = 8;
    std::vector<std::string> alone(kRequests);
    for (int i = 0; i < kRequests; ++i) {
        const json body = request_of(i);
        const auto response = speech(body);
        ASSERT_EQ(response.status, 200) << response.body;
        alone[i] = audio_of(body, response);
        ASSERT_GT(alone[i].size(), 1000u);
    }
    std::vector<std::string> together(kRequests);
    std::vector<std::thread> clients;
    for (int i = 0; i < kRequests; ++i) {
        clients.emplace_back([&, i] {
            const json body = request_of(i);
            together[i] = audio_of(body, speech(body));
        });
    }
    for (auto& client : clients) client.join();
    for (int i = 0; i < kRequests; ++i) {
        EXPECT_EQ(together[i].size(), alone[i].size()) << i;
        EXPECT_TRUE(together[i] == alone[i]) << "request " << i << " differs";
    }
}

}  // namespace
}  // namespace omnirt::serve::api

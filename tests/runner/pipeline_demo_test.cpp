// configs/demo.yaml run whole: the demo stages hosted in this process and in child processes,
// with the request layout of the OpenAI layer (docs/serve_openai.md).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "demo/demo_stages.h"
#include "pipeline_harness.h"
#include "support/command.h"

namespace omnirt::testing {
namespace {

using runner::Placement;
using Kind = pipeline::RequestEvent::Kind;
constexpr auto kEventTimeout = std::chrono::milliseconds(30000);

std::string demo_yaml() {
    std::ifstream file(source_path("configs/demo.yaml"));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

OmniRequest chat(const std::string& text, List modalities, Map params = {}) {
    return OmniRequest{
        .inputs =
            Map{{"messages",
                 List{Value(
                     Map{{"role", "user"},
                         {"content", List{Value(Map{{"type", "text"}, {"text", Value(text)}})}}})}},
                {"modalities", std::move(modalities)},
                {"audio", Map{{"voice", "alloy"}, {"format", "wav"}}}},
        .params = Value(std::move(params)),
        .metadata = Map{{"api", "chat.completions"}, {"model", "demo"}}};
}

OmniRequest speech(const std::string& text) {
    return OmniRequest{.inputs = Map{{"text", Value(text)},
                                     {"voice", "echo"},
                                     {"instructions", ""},
                                     {"response_format", "mp3"},
                                     {"speed", 1.0}},
                       .params = Map{{"sampling", Map{}}, {"stream", true}},
                       .metadata = Map{{"api", "audio.speech"}, {"model", "demo"}}};
}

// Everything a streamed request produced.
struct Streamed {
    std::string text;  // the thinker's text deltas, concatenated
    std::int64_t text_chunks = 0;
    std::int64_t audio_chunks = 0;
    std::int64_t audio_samples = 0;  // over every audio delta
    pipeline::RequestEvent end;
};

class PipelineDemo : public ::testing::TestWithParam<Layout> {
  protected:
    void SetUp() override {
        auto started = start_pipeline(demo_yaml(), GetParam());
        ASSERT_TRUE(started.has_value()) << started.error().to_string();
        pipeline_ = std::move(*started);
    }
    void TearDown() override {
        if (!pipeline_) return;
        EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline_); }));
        EXPECT_EQ(pipeline_->coordinator().live_requests(), 0u);
        std::string runtime_dir = pipeline_->plan().runtime_dir;
        auto pids = pipeline_->process_ids();
        pipeline_->stop();
        EXPECT_EQ(count_instance_segments(runtime_dir), 0);
        for (const auto& [name, pid] : pids) EXPECT_FALSE(process_alive(pid)) << name;
    }

    Streamed run(const std::string& id, OmniRequest request) {
        Streamed out;
        auto stream = pipeline_->stream(id, std::move(request));
        EXPECT_TRUE(stream.has_value()) << stream.error().to_string();
        if (!stream) return out;
        while (true) {
            auto event = (*stream)->next(kEventTimeout);
            EXPECT_TRUE(event.has_value() && event->has_value());
            if (!event || !event->has_value()) return out;
            pipeline::RequestEvent& current = **event;
            if (current.terminal()) {
                out.end = std::move(current);
                return out;
            }
            if (current.from_stage == "thinker") {
                EXPECT_EQ(current.chunk.as_map().size(), 1u);
                out.text += current.chunk.find("text")->as_string();
                ++out.text_chunks;
            } else {
                EXPECT_EQ(current.from_stage, "talker");
                EXPECT_EQ(*current.chunk.find("sample_rate"), Value(demo::kDemoSampleRate));
                const Tensor& audio = current.chunk.find("audio")->as_tensor();
                EXPECT_EQ(audio.dtype(), DType::f32);
                EXPECT_EQ(audio.dim(), 1u);
                out.audio_samples += audio.numel();
                ++out.audio_chunks;
            }
        }
    }

    std::unique_ptr<runner::Pipeline> pipeline_;
};

TEST_P(PipelineDemo, ChatTextOnlyEndsAtDecode) {
    Streamed out = run("text-1", chat("hello there", List{"text"}));
    ASSERT_EQ(out.end.kind, Kind::completed) << out.end.error.to_string();
    EXPECT_EQ(out.audio_chunks, 0);
    EXPECT_EQ(out.text_chunks, 4);
    // One terminal: the result is decode's data itself.
    EXPECT_EQ(out.end.result.data,
              Value(Map{{"text", "You said: hello there."},
                        {"finish_reason", "stop"},
                        {"usage", Map{{"prompt_tokens", 2}, {"completion_tokens", 4}}}}));
    EXPECT_EQ(out.text, "You said: hello there.");
}

TEST_P(PipelineDemo, ChatWithAudioEndsAtDecodeAndTalker) {
    Streamed out = run("audio-1", chat("hello there", List{"text", "audio"}));
    ASSERT_EQ(out.end.kind, Kind::completed) << out.end.error.to_string();
    const Value* decode = out.end.result.data.find("decode");
    const Value* talker = out.end.result.data.find("talker");
    ASSERT_NE(decode, nullptr) << out.end.result.data.debug_string();
    ASSERT_NE(talker, nullptr) << out.end.result.data.debug_string();
    EXPECT_EQ(*decode->find("text"), Value(out.text));
    EXPECT_EQ(*talker->find("transcript"), Value(out.text));
    EXPECT_EQ(*talker->find("sample_rate"), Value(demo::kDemoSampleRate));
    EXPECT_EQ(out.audio_chunks, out.text_chunks);
    EXPECT_EQ(talker->find("audio")->as_tensor().numel(), out.audio_samples);
    EXPECT_EQ(out.audio_samples,
              static_cast<std::int64_t>(out.text.size()) * demo::kDemoSamplesPerCharacter);
}

TEST_P(PipelineDemo, SpeechSpeaksTheTextExactly) {
    const std::string text = "The quick  brown fox.";
    Streamed out = run("speech-1", speech(text));
    ASSERT_EQ(out.end.kind, Kind::completed) << out.end.error.to_string();
    EXPECT_EQ(out.text, text);
    const Value* talker = out.end.result.data.find("talker");
    ASSERT_NE(talker, nullptr) << out.end.result.data.debug_string();
    EXPECT_EQ(*talker->find("transcript"), Value(text));
    EXPECT_EQ(talker->find("audio")->as_tensor().numel(), out.audio_samples);
    EXPECT_EQ(out.audio_samples,
              static_cast<std::int64_t>(text.size()) * demo::kDemoSamplesPerCharacter);
}

TEST_P(PipelineDemo, ParamsShapeTheReply) {
    auto limited = pipeline_->submit(
        "max-1", chat("one two three", List{"text", "audio"}, Map{{"max_tokens", 2}}));
    ASSERT_TRUE(limited.has_value()) << limited.error().to_string();
    EXPECT_EQ(*limited->data.find("decode")->find("text"), Value("You said:"));
    EXPECT_EQ(*limited->data.find("decode")->find("finish_reason"), Value("length"));
    EXPECT_EQ(*limited->data.find("talker")->find("transcript"), Value("You said:"));

    auto stopped = pipeline_->submit(
        "stop-1", chat("one two three", List{"text"}, Map{{"stop", List{"two"}}}));
    ASSERT_TRUE(stopped.has_value()) << stopped.error().to_string();
    EXPECT_EQ(*stopped->data.find("text"), Value("You said: one "));
    EXPECT_EQ(*stopped->data.find("finish_reason"), Value("stop"));

    auto sampled = [&](const std::string& id, std::int64_t seed) {
        auto result = pipeline_->submit(
            id,
            chat("hi", List{"text"}, Map{{"sampling", Map{{"temperature", 0.9}, {"seed", seed}}}}));
        EXPECT_TRUE(result.has_value()) << result.error().to_string();
        return result ? result->data.find("text")->as_string() : std::string();
    };
    const std::string first = sampled("seed-1", 42);
    EXPECT_EQ(sampled("seed-2", 42), first);
    EXPECT_NE(sampled("seed-3", 43), first);
}

TEST_P(PipelineDemo, BadTokenDelayFailsTheRequestNamingIt) {
    auto result = pipeline_->submit(
        "bad-1", chat("hi", List{"text", "audio"},
                      Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", "5"}}}}}}));
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::invalid_argument) << result.error().to_string();
    EXPECT_NE(result.error().message.find("token_delay_ms"), std::string::npos)
        << result.error().message;
}

TEST_P(PipelineDemo, AbortDuringTheTokenDelayLeavesNothingRunning) {
    auto stream = pipeline_->stream(
        "slow-1", chat("one two three", List{"text", "audio"},
                       Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", 10000}}}}}}));
    ASSERT_TRUE(stream.has_value()) << stream.error().to_string();
    // The first word and its audio arrive at once; the next word is 10 s away.
    int chunks = 0;
    while (chunks < 2) {
        auto event = (*stream)->next(kEventTimeout);
        ASSERT_TRUE(event.has_value() && event->has_value());
        ASSERT_FALSE((*event)->terminal()) << (*event)->error.to_string();
        ++chunks;
    }
    // The stages report the request (so the idle check below is not an old heartbeat).
    ASSERT_TRUE(eventually([&] { return !all_stages_idle(*pipeline_); }));
    const auto aborted_at = std::chrono::steady_clock::now();
    ASSERT_TRUE(pipeline_->abort("slow-1", "client went away").has_value());
    std::optional<pipeline::RequestEvent> end;
    while (!end) {
        auto event = (*stream)->next(kEventTimeout);
        ASSERT_TRUE(event.has_value() && event->has_value());
        if ((*event)->terminal()) end = **event;
    }
    EXPECT_EQ(end->kind, Kind::aborted);
    // The thinker and the talker (which held the open stream) let go before the 10 s delay
    // (the margin is for a loaded machine; waiting out the delay would take 10 s).
    EXPECT_TRUE(
        eventually([&] { return all_stages_idle(*pipeline_); }, std::chrono::milliseconds(9000)));
    EXPECT_LT(std::chrono::steady_clock::now() - aborted_at, std::chrono::seconds(9));
    auto again = pipeline_->submit("after-1", chat("hi", List{"text"}));
    ASSERT_TRUE(again.has_value()) << again.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineDemo,
                         ::testing::Values(Layout{Placement::in_process, false, "InProcess"},
                                           Layout{Placement::processes, false, "ChildProcesses"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace omnirt::testing

// The demo stages driven directly through their schedulers' inboxes and outboxes (the thinker's
// stream chunks are fed to the talker by hand), and the pure pieces they are made of. The whole
// pipeline (configs/demo.yaml) runs in tests/runner/pipeline_demo_test.cpp.
#include "demo/demo_stages.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <thread>

#include "pipeline/stage_factory.h"

namespace omnirt::demo {
namespace {

using pipeline::Clock;
using pipeline::find_stage_factory;
using pipeline::IncomingKind;
using pipeline::IncomingMessage;
using pipeline::OutgoingKind;
using pipeline::OutgoingMessage;
using pipeline::Scheduler;
using pipeline::StageContext;
using pipeline::StreamChunk;

using namespace std::chrono_literals;
constexpr auto kHangGuard = 30s;

OmniRequest chat(const std::string& text, List modalities = {"text"}, Map params = {},
                 List extra_parts = {}) {
    List content{Value(Map{{"type", "text"}, {"text", Value(text)}})};
    for (Value& part : extra_parts) content.push_back(std::move(part));
    return OmniRequest{
        .inputs = Map{{"messages", List{Value(Map{{"role", "user"}, {"content", content}})}},
                      {"modalities", std::move(modalities)},
                      {"audio", Map{{"voice", ""}, {"format", "wav"}}}},
        .params = Value(std::move(params)),
        .metadata = Map{{"api", "chat.completions"}, {"model", "demo"}}};
}

OmniRequest speech(const std::string& text, const std::string& voice = "", double speed = 1.0) {
    return OmniRequest{.inputs = Map{{"text", Value(text)},
                                     {"voice", Value(voice)},
                                     {"instructions", ""},
                                     {"response_format", "wav"},
                                     {"speed", Value(speed)}},
                       .params = Map{{"sampling", Map{}}, {"stream", false}},
                       .metadata = Map{{"api", "audio.speech"}, {"model", "demo"}}};
}

Value media_part(const char* type) {
    return Value(Map{{"type", type}, {"mime", "x/y"}, {"source", "path"}, {"path", "/m"}});
}

// What one stage sent for one request.
struct StageRun {
    List client_chunks;
    List talker_chunks;  // thinker only: the chunks for stream_to stage "talker"
    std::optional<StagePayload> result;
    std::optional<Error> error;
};

class DemoStagesTest : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_TRUE(register_demo_stages(registry_).has_value()); }
    void TearDown() override {
        for (auto& scheduler : {&thinker_, &decode_, &talker_}) {
            if (*scheduler) (*scheduler)->stop();
        }
    }

    std::unique_ptr<Scheduler> build(const std::string& factory, StageContext context) {
        auto make = find_stage_factory(factory, registry_);
        EXPECT_TRUE(make.has_value()) << make.error().to_string();
        if (!make) return nullptr;
        auto scheduler = (*make)(context);
        EXPECT_TRUE(scheduler.has_value()) << scheduler.error().to_string();
        if (!scheduler) return nullptr;
        EXPECT_TRUE((*scheduler)->start().has_value());
        return std::move(*scheduler);
    }
    void start_thinker(Map args = {}) {
        thinker_ = build("demo.thinker", StageContext{.stage_name = "thinker",
                                                      .args = std::move(args),
                                                      .next = {"decode", "talker"},
                                                      .stream_to = {"talker"}});
        ASSERT_NE(thinker_, nullptr);
    }
    void start_talker() {
        talker_ = build(
            "demo.talker",
            StageContext{.stage_name = "talker", .stream_sources = {"thinker"}, .terminal = true});
        ASSERT_NE(talker_, nullptr);
    }

    static void push(Scheduler& scheduler, const std::string& id, const OmniRequest& request,
                     Value data = {}) {
        ASSERT_TRUE(scheduler.inbox().push(
            IncomingMessage{.request_id = id,
                            .kind = IncomingKind::new_request,
                            .payload = std::make_shared<const StagePayload>(StagePayload{
                                .request_id = id, .request = request, .data = std::move(data)})}));
    }
    static void push_chunk(Scheduler& scheduler, const std::string& id, Value chunk,
                           std::int64_t chunk_id) {
        ASSERT_TRUE(scheduler.inbox().push(
            IncomingMessage{.request_id = id,
                            .kind = IncomingKind::stream_chunk,
                            .chunk = std::make_shared<const StreamChunk>(
                                StreamChunk{.chunk_id = chunk_id, .chunk = std::move(chunk)}),
                            .from_stage = "thinker"}));
    }
    static void push_done(Scheduler& scheduler, const std::string& id) {
        ASSERT_TRUE(scheduler.inbox().push(IncomingMessage{
            .request_id = id, .kind = IncomingKind::stream_done, .from_stage = "thinker"}));
    }

    // Reads the outbox until the request's result or error.
    static StageRun drain(Scheduler& scheduler) {
        StageRun run;
        while (!run.result && !run.error) {
            auto out = scheduler.outbox().pop_until(Clock::now() + kHangGuard);
            if (!out) {
                ADD_FAILURE() << "no output within the hang guard";
                run.error = Error{ErrorCode::deadline_exceeded, "hang guard"};
                break;
            }
            switch (out->kind) {
                case OutgoingKind::stream:
                    if (!out->target) {
                        run.client_chunks.push_back(out->chunk->chunk);
                    } else {
                        EXPECT_EQ(*out->target, "talker");
                        run.talker_chunks.push_back(out->chunk->chunk);
                    }
                    break;
                case OutgoingKind::result:
                    run.result = *out->result;
                    break;
                case OutgoingKind::error:
                    run.error = out->error;
                    break;
            }
        }
        return run;
    }

    StageRun think(const OmniRequest& request, const std::string& id = "r") {
        push(*thinker_, id, request);
        return drain(*thinker_);
    }
    // The reply's text, checked to be the concatenation of the client chunks.
    static std::string reply_text(const StageRun& run) {
        EXPECT_FALSE(run.error) << run.error->to_string();
        if (!run.result) return "";
        std::string streamed;
        for (const Value& chunk : run.client_chunks) {
            EXPECT_EQ(chunk.as_map().size(), 1u) << chunk.debug_string();
            streamed += chunk.find("text")->as_string();
        }
        const std::string& text = run.result->data.find("text")->as_string();
        EXPECT_EQ(streamed, text);
        return text;
    }
    Error think_error(const OmniRequest& request) {
        StageRun run = think(request);
        EXPECT_TRUE(run.error.has_value()) << "accepted: " << request.params.debug_string();
        EXPECT_TRUE(run.client_chunks.empty());
        return run.error.value_or(Error{});
    }

    Registry registry_;
    std::unique_ptr<Scheduler> thinker_;
    std::unique_ptr<Scheduler> decode_;
    std::unique_ptr<Scheduler> talker_;
};

std::vector<float> samples_of(const Value& tensor_value) {
    const Tensor& tensor = tensor_value.as_tensor();
    EXPECT_EQ(tensor.dtype(), DType::f32);
    EXPECT_EQ(tensor.dim(), 1u);
    const float* data = tensor.data_as<float>();
    return std::vector<float>(data, data + tensor.numel());
}

TEST_F(DemoStagesTest, RegistersEveryNameIdempotently) {
    EXPECT_TRUE(register_demo_stages(registry_).has_value());
    for (const char* name : {"demo.thinker", "demo.decode", "demo.talker"}) {
        EXPECT_TRUE(find_stage_factory(name, registry_).has_value()) << name;
    }
    EXPECT_TRUE(registry_.get<RouteFn>(FunctionKind::route, "demo.route_thinker").has_value());
    EXPECT_TRUE(registry_.get<StreamDoneFn>(FunctionKind::stream_done, "demo.thinker_stream_done")
                    .has_value());
    EXPECT_TRUE(
        registry_.get<TerminalStagesFn>(FunctionKind::terminal_stages, "demo.terminal_stages")
            .has_value());
}

TEST_F(DemoStagesTest, FunctionsAddTheTalkerOnlyWhenAudioIsWanted) {
    auto route = *registry_.get<RouteFn>(FunctionKind::route, "demo.route_thinker");
    auto done = *registry_.get<StreamDoneFn>(FunctionKind::stream_done, "demo.thinker_stream_done");
    auto terminals =
        *registry_.get<TerminalStagesFn>(FunctionKind::terminal_stages, "demo.terminal_stages");
    using Names = std::vector<std::string>;
    const Names decode_only{"decode"};
    const Names both{"decode", "talker"};
    const Names talker_only{"talker"};
    const struct {
        OmniRequest request;
        bool audio;
    } cases[] = {{chat("hi"), false},
                 {chat("hi", List{"text", "audio"}), true},
                 {chat("hi", List{"audio"}), true},
                 {speech("hi"), true},
                 {OmniRequest{}, false}};
    for (const auto& [request, audio] : cases) {
        SCOPED_TRACE(request.inputs.debug_string());
        const StagePayload output{.request_id = "r", .request = request};
        EXPECT_EQ(*route("r", output), audio ? both : decode_only);
        EXPECT_EQ(*done("r", output), audio ? talker_only : Names());
        EXPECT_EQ(**terminals(request), audio ? both : decode_only);
    }
    auto bad = terminals(chat("hi", List{"text", 3}));
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().message.find("modalities"), std::string::npos);
}

TEST(DemoTokens, ConcatenateToTheTextExactly) {
    EXPECT_EQ(split_demo_tokens("  Hello  big\nworld "),
              (std::vector<std::string>{"  Hello  ", "big\n", "world "}));
    EXPECT_EQ(split_demo_tokens("one"), (std::vector<std::string>{"one"}));
    EXPECT_TRUE(split_demo_tokens("").empty());
    EXPECT_TRUE(split_demo_tokens(" \n ").empty());
    EXPECT_EQ(count_demo_words("  Hello  big\nworld "), 3);
    EXPECT_EQ(count_demo_words(""), 0);
}

TEST_F(DemoStagesTest, ChatTextOnlyStreamsEveryWordAndNothingToTheTalker) {
    start_thinker();
    StageRun run = think(chat("hello world"));
    EXPECT_EQ(reply_text(run), "You said: hello world.");
    EXPECT_EQ(run.client_chunks,
              (List{Value(Map{{"text", "You "}}), Value(Map{{"text", "said: "}}),
                    Value(Map{{"text", "hello "}}), Value(Map{{"text", "world."}})}));
    EXPECT_TRUE(run.talker_chunks.empty());
    EXPECT_EQ(*run.result->data.find("finish_reason"), Value("stop"));
    EXPECT_EQ(*run.result->data.find("usage"),
              Value(Map{{"prompt_tokens", 2}, {"completion_tokens", 4}}));
    EXPECT_EQ(run.result->request, chat("hello world"));

    // decode passes the text result through.
    decode_ = build("demo.decode", StageContext{.stage_name = "decode", .terminal = true});
    ASSERT_NE(decode_, nullptr);
    push(*decode_, "r", run.result->request, run.result->data);
    StageRun decoded = drain(*decode_);
    ASSERT_TRUE(decoded.result) << decoded.error->to_string();
    EXPECT_EQ(decoded.result->data, run.result->data);
    push(*decode_, "bad", chat("x"), Value(Map{{"text", "only"}}));
    StageRun bad = drain(*decode_);
    ASSERT_TRUE(bad.error);
    EXPECT_NE(bad.error->message.find("finish_reason"), std::string::npos);
}

TEST_F(DemoStagesTest, ChatReadsTheLastUserMessageAndCountsMediaAndPromptWords) {
    start_thinker();
    StageRun run = think(chat(
        "look at this", List{"text"}, {},
        List{media_part("image"), media_part("audio"), media_part("audio"), media_part("video")}));
    EXPECT_EQ(reply_text(run), "You said: look at this. (1 image, 2 audio clips, 1 video)");

    OmniRequest history = chat("second try");
    List& messages = history.inputs["messages"].as_list();
    messages.insert(messages.begin(), Value(Map{{"role", "assistant"}, {"content", "ok then"}}));
    messages.insert(messages.begin(), Value(Map{{"role", "user"}, {"content", "first one"}}));
    run = think(history, "history");
    EXPECT_EQ(reply_text(run), "You said: second try.");
    EXPECT_EQ(*run.result->data.find("usage")->find("prompt_tokens"), Value(6));

    run = think(OmniRequest{.inputs = Map{{"messages", List{}}}}, "empty");
    EXPECT_EQ(reply_text(run), "You said nothing.");
}

TEST_F(DemoStagesTest, MaxTokensCapsTheWordsWithFinishLength) {
    start_thinker();
    StageRun run = think(chat("hello world", List{"text"}, Map{{"max_tokens", 3}}));
    EXPECT_EQ(reply_text(run), "You said: hello");
    EXPECT_EQ(*run.result->data.find("finish_reason"), Value("length"));
    EXPECT_EQ(*run.result->data.find("usage")->find("completion_tokens"), Value(3));
    // Exactly as many words as allowed is a normal stop.
    run = think(chat("hello world", List{"text"}, Map{{"max_tokens", 4}}), "exact");
    EXPECT_EQ(reply_text(run), "You said: hello world.");
    EXPECT_EQ(*run.result->data.find("finish_reason"), Value("stop"));
}

TEST_F(DemoStagesTest, StopStringsCutBeforeTheEarliestOccurrence) {
    start_thinker();
    StageRun run =
        think(chat("one two three", List{"text"}, Map{{"stop", List{"three", "two", ""}}}));
    EXPECT_EQ(reply_text(run), "You said: one ");
    EXPECT_EQ(*run.result->data.find("finish_reason"), Value("stop"));
    EXPECT_EQ(*run.result->data.find("usage")->find("completion_tokens"), Value(3));
    run = think(chat("one two", List{"text"}, Map{{"stop", List{"absent"}}}), "none");
    EXPECT_EQ(reply_text(run), "You said: one two.");
}

TEST_F(DemoStagesTest, TemperatureAppendsSeededWords) {
    start_thinker();
    auto sampled = [&](const std::string& id, Map params) {
        return reply_text(think(chat("hi", List{"text"}, std::move(params)), id));
    };
    const std::string seeded =
        sampled("a", Map{{"sampling", Map{{"temperature", 0.8}, {"seed", 7}}}});
    EXPECT_EQ(seeded.rfind("You said: hi. ", 0), 0u) << seeded;
    const std::int64_t extra = count_demo_words(seeded) - 3;
    EXPECT_GE(extra, 3);
    EXPECT_LE(extra, 6);
    EXPECT_EQ(sampled("b", Map{{"sampling", Map{{"temperature", 0.8}, {"seed", 7}}}}), seeded);
    EXPECT_NE(sampled("c", Map{{"sampling", Map{{"temperature", 0.8}, {"seed", 8}}}}), seeded);
    // params.seed is the fallback; the thinker's stage_sampling overlays sampling.
    EXPECT_EQ(sampled("d", Map{{"sampling", Map{{"temperature", 1}}}, {"seed", 7}}), seeded);
    EXPECT_EQ(sampled("e", Map{{"sampling", Map{{"temperature", 1}, {"seed", 7}}},
                               {"stage_sampling", Map{{"thinker", Map{{"temperature", 0}}}}}}),
              "You said: hi.");
    EXPECT_EQ(sampled("f", Map{{"sampling", Map{{"temperature", 0}, {"seed", 7}}}}),
              "You said: hi.");
    EXPECT_EQ(sampled("g", Map{}), "You said: hi.");
}

TEST_F(DemoStagesTest, BadParamsAreInvalidArgumentsNamingTheParam) {
    start_thinker();
    const struct {
        Map params;
        const char* needle;
    } cases[] = {
        {Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", "10"}}}}}}, "token_delay_ms"},
        {Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", 1.5}}}}}}, "token_delay_ms"},
        {Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", 10001}}}}}}, "token_delay_ms"},
        {Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", -1}}}}}}, "token_delay_ms"},
        {Map{{"stage_params", Map{{"thinker", 5}}}}, "stage_params.thinker"},
        {Map{{"max_tokens", "5"}}, "max_tokens"},
        {Map{{"max_tokens", -1}}, "max_tokens"},
        {Map{{"stop", "x"}}, "stop"},
        {Map{{"stop", List{1}}}, "stop"},
        {Map{{"sampling", Map{{"temperature", "hot"}}}}, "temperature"},
        {Map{{"sampling", Map{{"temperature", -0.5}}}}, "temperature"},
        {Map{{"sampling", Map{{"seed", 1.5}}}}, "seed"},
        {Map{{"stage_sampling", Map{{"thinker", List{}}}}}, "stage_sampling.thinker"},
    };
    for (const auto& [params, needle] : cases) {
        Error error = think_error(chat("hi", List{"text"}, params));
        EXPECT_EQ(error.code, ErrorCode::invalid_argument) << error.to_string();
        EXPECT_NE(error.message.find(needle), std::string::npos) << error.message;
    }
    Error speed = think_error(speech("hi", "", 9.0));
    EXPECT_NE(speed.message.find("inputs.speed"), std::string::npos) << speed.message;
    OmniRequest no_text = speech("hi");
    no_text.inputs["text"] = Value(3);
    EXPECT_NE(think_error(no_text).message.find("inputs.text"), std::string::npos);
    // Another stage's params are not the thinker's business.
    StageRun other =
        think(chat("hi", List{"text"},
                   Map{{"stage_params", Map{{"talker", Map{{"token_delay_ms", "x"}}}}}}),
              "other");
    EXPECT_EQ(reply_text(other), "You said: hi.");
}

TEST_F(DemoStagesTest, AbortEndsTheTokenDelayAtOnce) {
    start_thinker(Map{{"worker_threads", 1}});
    push(*thinker_, "slow",
         chat("one two three", List{"text", "audio"},
              Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", 10000}}}}}}));
    // The first token leaves at once (to the client, then to the talker); the next one is 10 s
    // away.
    for (int i = 0; i < 2; ++i) {
        auto first = thinker_->outbox().pop_until(Clock::now() + kHangGuard);
        ASSERT_TRUE(first.has_value());
        ASSERT_EQ(first->kind, OutgoingKind::stream);
    }
    EXPECT_EQ(thinker_->active_requests(), 1u);
    const auto aborted_at = Clock::now();
    thinker_->abort("slow");
    // The single worker is free again long before the delay would have passed: the next request
    // completes, and nothing of the aborted one comes out.
    StageRun next = think(chat("hi"), "next");
    EXPECT_EQ(reply_text(next), "You said: hi.");
    EXPECT_LT(Clock::now() - aborted_at, 9s);  // the delay is 10 s; the margin is for load
    EXPECT_EQ(thinker_->active_requests(), 0u);
}

TEST_F(DemoStagesTest, TokenDelaySpacesTheTokens) {
    start_thinker();
    const auto started = Clock::now();
    StageRun run = think(chat(
        "a b", List{"text"}, Map{{"stage_params", Map{{"thinker", Map{{"token_delay_ms", 30}}}}}}));
    EXPECT_EQ(reply_text(run), "You said: a b.");
    EXPECT_GE(Clock::now() - started, 90ms);  // 4 tokens, 3 gaps
}

TEST(DemoAudio, VoicesAndTones) {
    EXPECT_EQ(demo_voice_base_hz(""), 220.0);
    EXPECT_EQ(demo_voice_base_hz("alloy"), 220.0);
    const double nova = demo_voice_base_hz("nova");
    EXPECT_GE(nova, 150.0);
    EXPECT_LT(nova, 350.0);
    EXPECT_EQ(nova, std::floor(nova));
    EXPECT_EQ(demo_voice_base_hz("nova"), nova);
    // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c.
    EXPECT_EQ(demo_voice_base_hz("a"), 150.0 + static_cast<double>(0xaf63dc4c8601ec8cULL % 200));

    const std::vector<float> audio = synthesize_demo_audio("a b", 220.0, 1.0);
    ASSERT_EQ(audio.size(), 3u * kDemoSamplesPerCharacter);
    // 'a' is U+0061: 97 % 24 = 1, so 245 Hz; past the 2 ms fade the sine is at full amplitude.
    for (int k : {48, 100, 311}) {
        const double expected = 0.25 * std::sin(2 * std::numbers::pi * 245.0 * k / 24000.0);
        EXPECT_NEAR(audio[static_cast<std::size_t>(k)], expected, 1e-6) << k;
    }
    EXPECT_EQ(audio[0], 0.0F);                                               // faded in
    for (std::size_t k = 360; k < 720; ++k) ASSERT_EQ(audio[k], 0.0F) << k;  // the space
    float peak = 0;
    for (float sample : audio) peak = std::max(peak, std::abs(sample));
    EXPECT_LE(peak, 0.25F);
    EXPECT_GT(peak, 0.24F);
    // Pieces concatenate; speed divides the duration; code points, not bytes, count.
    std::vector<float> joined = synthesize_demo_audio("a", 220.0, 1.0);
    const std::vector<float> rest = synthesize_demo_audio(" b", 220.0, 1.0);
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, audio);
    EXPECT_EQ(synthesize_demo_audio("ab", 220.0, 2.0).size(), 360u);
    EXPECT_EQ(synthesize_demo_audio("ab", 220.0, 0.25).size(), 2880u);
    EXPECT_EQ(synthesize_demo_audio("\xC3\xA9\xE2\x82\xAC", 220.0, 1.0).size(), 720u);  // é€
    EXPECT_EQ(synthesize_demo_audio("\xFF", 220.0, 1.0).size(), 360u);
    EXPECT_TRUE(synthesize_demo_audio("", 220.0, 1.0).empty());
}

TEST_F(DemoStagesTest, TalkerTakesChunksBeforeThePayloadAndSendsOneDeltaPerChunk) {
    start_talker();
    push_chunk(*talker_, "r", Value(Map{{"text", "Hi "}, {"voice", "nova"}, {"speed", 2.0}}), 0);
    push_chunk(*talker_, "r", Value(Map{{"text", ""}, {"voice", "nova"}, {"speed", 2.0}}), 1);
    push_chunk(*talker_, "r", Value(Map{{"text", "you"}, {"voice", "nova"}, {"speed", 2.0}}), 2);
    push_done(*talker_, "r");
    push(*talker_, "r", speech("Hi you", "nova", 2.0), Value(Map{{"text", "Hi you"}}));
    StageRun run = drain(*talker_);
    ASSERT_TRUE(run.result) << run.error->to_string();
    ASSERT_EQ(run.client_chunks.size(), 2u);  // the empty chunk makes no delta
    std::vector<float> streamed;
    for (const Value& chunk : run.client_chunks) {
        EXPECT_EQ(chunk.as_map().size(), 2u);
        EXPECT_EQ(*chunk.find("sample_rate"), Value(24000));
        const std::vector<float> samples = samples_of(*chunk.find("audio"));
        streamed.insert(streamed.end(), samples.begin(), samples.end());
    }
    EXPECT_EQ(samples_of(*run.client_chunks[0].find("audio")).size(), 3u * 180);
    const Value& data = run.result->data;
    EXPECT_EQ(data.as_map().size(), 3u);
    EXPECT_EQ(*data.find("sample_rate"), Value(24000));
    EXPECT_EQ(*data.find("transcript"), Value("Hi you"));
    EXPECT_EQ(samples_of(*data.find("audio")), streamed);
    EXPECT_EQ(streamed, synthesize_demo_audio("Hi you", demo_voice_base_hz("nova"), 2.0));
    EXPECT_EQ(run.result->request, speech("Hi you", "nova", 2.0));
    EXPECT_EQ(talker_->active_requests(), 0u);

    // No chunks at all (an empty reply): an empty audio result.
    push_done(*talker_, "empty");
    push(*talker_, "empty", speech(""));
    run = drain(*talker_);
    ASSERT_TRUE(run.result);
    EXPECT_TRUE(samples_of(*run.result->data.find("audio")).empty());

    push_chunk(*talker_, "bad", Value(Map{{"words", "x"}}), 0);
    run = drain(*talker_);
    ASSERT_TRUE(run.error);
    EXPECT_NE(run.error->message.find("'text'"), std::string::npos) << run.error->message;
}

// The thinker's talker chunks fed to the talker: what the pipeline does across its stream edge.
TEST_F(DemoStagesTest, ChatWithAudioAndSpeechFlowFromThinkerToTalker) {
    start_thinker();
    start_talker();
    const struct {
        OmniRequest request;
        std::string text;
        std::string voice;
        double speed;
    } cases[] = {
        {chat("hello world", List{"text", "audio"}), "You said: hello world.", "", 1.0},
        {speech("Hello  brave\nnew world", "nova", 1.5), "Hello  brave\nnew world", "nova", 1.5},
    };
    int index = 0;
    for (const auto& [request, text, voice, speed] : cases) {
        const std::string id = "r" + std::to_string(index++);
        StageRun thought = think(request, id);
        EXPECT_EQ(reply_text(thought), text);
        ASSERT_EQ(thought.talker_chunks.size(), thought.client_chunks.size());
        std::int64_t chunk_id = 0;
        for (const Value& chunk : thought.talker_chunks) {
            EXPECT_EQ(*chunk.find("voice"), Value(voice));
            EXPECT_EQ(*chunk.find("speed"), Value(speed));
            push_chunk(*talker_, id, chunk, chunk_id++);
        }
        push_done(*talker_, id);
        push(*talker_, id, thought.result->request, thought.result->data);
        StageRun spoken = drain(*talker_);
        ASSERT_TRUE(spoken.result) << spoken.error->to_string();
        EXPECT_EQ(spoken.client_chunks.size(), thought.client_chunks.size());
        std::size_t streamed = 0;
        for (const Value& chunk : spoken.client_chunks) {
            streamed += samples_of(*chunk.find("audio")).size();
        }
        const std::vector<float> audio = samples_of(*spoken.result->data.find("audio"));
        EXPECT_EQ(streamed, audio.size());
        const auto per_character = static_cast<std::size_t>(std::llround(360 / speed));
        EXPECT_EQ(audio.size(), text.size() * per_character);
        EXPECT_EQ(*spoken.result->data.find("transcript"), Value(text));
    }
}

}  // namespace
}  // namespace omnirt::demo

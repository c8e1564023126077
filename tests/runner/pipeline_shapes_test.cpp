// The data-flow shapes of architecture.md (sequential, fan-out, fan-in) and the Qwen3-Omni
// speech shape, built from test stages, each hosted in this process, in one child process, and
// in one child process per process group.
#include <gtest/gtest.h>

#include <filesystem>

#include "pipeline_harness.h"

namespace omnirt::testing {
namespace {

using runner::Placement;

class PipelineShapes : public ::testing::TestWithParam<Layout> {
  protected:
    std::string p(const std::string& process) const { return process_name(GetParam(), process); }

    std::unique_ptr<runner::Pipeline> start(const std::string& yaml) {
        auto pipeline = start_pipeline(yaml, GetParam());
        EXPECT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
        if (!pipeline) return nullptr;
        return std::move(*pipeline);
    }

    // Stops the pipeline and checks that nothing outlives it.
    void stop_and_check(std::unique_ptr<runner::Pipeline> pipeline) {
        std::string runtime_dir = pipeline->plan().runtime_dir;
        auto pids = pipeline->process_ids();
        pipeline->stop();
        EXPECT_FALSE(std::filesystem::exists(runtime_dir));
        EXPECT_EQ(count_instance_segments(runtime_dir), 0);
        for (const auto& [name, pid] : pids) EXPECT_FALSE(process_alive(pid)) << name;
    }
};

TEST_P(PipelineShapes, SequentialCarriesTensorsThroughEveryStage) {
    auto pipeline = start(R"(
name: sequential
model_path: none
stages:
  - {name: ingest, process: )" +
                          p("a") + R"(, factory: test.identity, next: produce}
  - {name: produce, process: )" +
                          p("b") + R"(, factory: test.tensor_producer,
     factory_args: {bytes: 1048576, dtype: float32}, next: double}
  - {name: double, process: )" +
                          p("c") + R"(, factory: test.arithmetic,
     factory_args: {scale: 2}, next: last}
  - {name: last, process: )" +
                          p("c") + R"(, factory: test.identity, terminal: true}
)");
    ASSERT_TRUE(pipeline);
    for (int i = 0; i < 3; ++i) {
        auto result =
            pipeline->submit("seq-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->request_id, "seq-" + std::to_string(i));
        const Value* tensor = result->data.find("tensor");
        ASSERT_NE(tensor, nullptr) << result->data.debug_string();
        const Tensor& doubled = tensor->as_tensor();
        ASSERT_EQ(doubled.numel(), 1048576 / 4);
        const float* values = doubled.data_as<float>();
        for (std::int64_t k = 0; k < doubled.numel(); k += 997) {
            ASSERT_EQ(values[k], 2.0f * static_cast<float>(k % 251)) << k;
        }
        EXPECT_EQ(*result->data.find("input"), (Value(Map{{"n", i}})));
    }
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
    stop_and_check(std::move(pipeline));
}

// inline_compute: idle stages compute on the thread that delivers the request (the control IO
// thread across processes, the sender's thread in one process); same results, and a request
// that fails in an inline stage fails as usual.
TEST_P(PipelineShapes, InlineComputeStagesGiveTheSameResults) {
    auto pipeline = start(R"(
name: inline
model_path: none
stages:
  - {name: produce, process: )" +
                          p("a") + R"(, factory: test.tensor_producer,
     factory_args: {bytes: 4096, dtype: float32, inline_compute: true}, next: double}
  - {name: double, process: )" +
                          p("b") + R"(, factory: test.arithmetic,
     factory_args: {scale: 2, inline_compute: true}, next: check}
  - {name: check, process: )" +
                          p("c") + R"(, factory: test.fail,
     factory_args: {inline_compute: true}, next: last}
  - {name: last, process: )" +
                          p("c") + R"(, factory: test.identity,
     factory_args: {inline_compute: true}, terminal: true}
)");
    ASSERT_TRUE(pipeline);
    for (int i = 0; i < 20; ++i) {
        auto result = pipeline->submit("inline-" + std::to_string(i), OmniRequest{});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        const Value* tensor = result->data.find("tensor");
        ASSERT_NE(tensor, nullptr) << result->data.debug_string();
        const float* values = tensor->as_tensor().data_as<float>();
        for (std::int64_t k = 0; k < 1024; k += 97) {
            ASSERT_EQ(values[k], 2.0f * static_cast<float>(k % 251)) << k;
        }
    }
    auto failed =
        pipeline->submit("inline-fail", OmniRequest{.params = Map{{"fail_stage", "check"}}});
    ASSERT_FALSE(failed.has_value());
    EXPECT_NE(failed.error().message.find("injected failure"), std::string::npos)
        << failed.error().message;
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
    stop_and_check(std::move(pipeline));
}

TEST_P(PipelineShapes, FanOutProjectsAPayloadPerTargetAndMergesTerminals) {
    auto pipeline = start(R"(
name: fan-out
model_path: none
stages:
  - name: split
    process: )" + p("a") + R"(
    factory: test.identity
    next: [left, right]
    project_payload: {left: test.project_tag, right: test.project_tag}
  - {name: left, process: )" +
                          p("b") + R"(, factory: test.identity, terminal: true}
  - {name: right, process: )" +
                          p("c") + R"(, factory: test.identity, terminal: true}
)");
    ASSERT_TRUE(pipeline);
    auto result = pipeline->submit("fan-out-1", OmniRequest{.inputs = Map{{"x", 7}}});
    ASSERT_TRUE(result.has_value()) << result.error().to_string();
    Value expected = Map{
        {"left", Map{{"projected_for", "left"}, {"data", Map{{"x", 7}}}}},
        {"right", Map{{"projected_for", "right"}, {"data", Map{{"x", 7}}}}},
    };
    EXPECT_EQ(result->data, expected) << result->data.debug_string();
    stop_and_check(std::move(pipeline));
}

TEST_P(PipelineShapes, FanInWaitsForEverySourceAndMerges) {
    auto pipeline = start(R"(
name: fan-in
model_path: none
stages:
  - {name: src, process: )" +
                          p("a") + R"(, factory: test.identity, next: [a, b, join]}
  - {name: a, process: )" +
                          p("b") + R"(, factory: test.arithmetic, factory_args: {scale: 10},
     next: join}
  - {name: b, process: )" +
                          p("c") + R"(, factory: test.arithmetic, factory_args: {offset: 1},
     next: join}
  - {name: join, process: )" +
                          p("a") + R"(, factory: test.identity, wait_for: [src, a, b],
     merge_fn: test.merge, terminal: true}
)");
    ASSERT_TRUE(pipeline);
    for (int i = 0; i < 5; ++i) {
        auto result =
            pipeline->submit("fan-in-" + std::to_string(i), OmniRequest{.inputs = Map{{"x", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        Value expected =
            Map{{"src", Map{{"x", i}}}, {"a", Map{{"x", 10 * i}}}, {"b", Map{{"x", i + 1}}}};
        EXPECT_EQ(result->data, expected) << result->data.debug_string();
    }
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
    stop_and_check(std::move(pipeline));
}

std::string omni_speech_yaml(const std::function<std::string(const std::string&)>& p) {
    return R"(
name: omni-speech-shape
model_path: none
terminal_stages_fn: test.terminal_from_params
stages:
  - name: preprocessing
    process: )" +
           p("preprocessing") + R"(
    factory: test.identity
    next: [image_encoder, audio_encoder, mm_aggregate]
    route_fn: test.route_from_params
    project_payload: {image_encoder: test.project_tag, audio_encoder: test.project_tag}
  - {name: image_encoder, process: )" +
           p("encoders") + R"(, factory: test.tensor_producer,
     factory_args: {bytes: 65536, dtype: float32}, next: mm_aggregate}
  - {name: audio_encoder, process: )" +
           p("encoders") + R"(, factory: test.arithmetic,
     next: mm_aggregate}
  - name: mm_aggregate
    process: )" +
           p("preprocessing") + R"(
    factory: test.identity
    wait_for: [preprocessing, image_encoder, audio_encoder]
    wait_for_fn: test.wait_for_from_params
    merge_fn: test.merge
    next: thinker
  - name: thinker
    process: )" +
           p("thinker") + R"(
    factory: test.token_streamer
    factory_args: {tokens: 5}
    next: [decode, talker]
    stream_to: [talker]
    stream_done_to_fn: test.stream_done_from_params
  - {name: decode, process: )" +
           p("decode") + R"(, factory: test.identity, terminal: true}
  - {name: talker, process: )" +
           p("talker") + R"(, factory: test.stream_collector,
     factory_args: {forward: true}, terminal: true}
)";
}

TEST_P(PipelineShapes, QwenOmniSpeechShape) {
    auto pipeline = start(omni_speech_yaml([&](const std::string& name) { return p(name); }));
    ASSERT_TRUE(pipeline);
    OmniRequest speech{
        .inputs = Map{{"prompt", "describe"}},
        .params = Map{{"route", List{"image_encoder", "audio_encoder", "mm_aggregate"}},
                      {"wait_for", List{"preprocessing", "image_encoder", "audio_encoder"}},
                      {"stream_done_to", List{"talker"}},
                      {"terminal_stages", List{"decode", "talker"}}}};
    auto stream = pipeline->stream("speech-1", speech);
    ASSERT_TRUE(stream.has_value()) << stream.error().to_string();
    int thinker_chunks = 0;
    int talker_chunks = 0;
    std::optional<pipeline::RequestEvent> end;
    while (!end) {
        auto event = (*stream)->next(std::chrono::milliseconds(30000));
        ASSERT_TRUE(event.has_value()) << event.error().to_string();
        ASSERT_TRUE(event->has_value());
        if ((*event)->terminal()) {
            end = std::move(**event);
        } else if ((*event)->from_stage == "thinker") {
            EXPECT_EQ((*event)->chunk_index, thinker_chunks);
            ++thinker_chunks;
        } else {
            EXPECT_EQ((*event)->from_stage, "talker");
            ++talker_chunks;
        }
    }
    ASSERT_EQ(end->kind, pipeline::RequestEvent::Kind::completed) << end->error.to_string();
    EXPECT_EQ(thinker_chunks, 5);
    EXPECT_EQ(talker_chunks, 5);
    const Value* decode = end->result.data.find("decode");
    const Value* talker = end->result.data.find("talker");
    ASSERT_NE(decode, nullptr) << end->result.data.debug_string();
    ASSERT_NE(talker, nullptr) << end->result.data.debug_string();
    EXPECT_EQ(*decode->find("text"), Value("t0 t1 t2 t3 t4 "));
    EXPECT_EQ(*talker->find("count"), Value(5));
    // The thinker's input is the merge of all three fan-in sources.
    const Value* merged = decode->find("input");
    ASSERT_NE(merged, nullptr);
    EXPECT_NE(merged->find("image_encoder"), nullptr);
    EXPECT_NE(merged->find("audio_encoder"), nullptr);
    EXPECT_NE(merged->find("preprocessing"), nullptr);

    // Text only: no encoders, one terminal stage.
    OmniRequest text{.inputs = Map{{"prompt", "hi"}},
                     .params = Map{{"route", List{"mm_aggregate"}},
                                   {"wait_for", List{"preprocessing"}},
                                   {"stream_done_to", List{"talker"}},
                                   {"terminal_stages", List{"decode"}}}};
    auto result = pipeline->submit("text-1", text);
    ASSERT_TRUE(result.has_value()) << result.error().to_string();
    EXPECT_EQ(*result->data.find("text"), Value("t0 t1 t2 t3 t4 "));
    EXPECT_EQ(result->data.find("input")->find("image_encoder"), nullptr);
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
    stop_and_check(std::move(pipeline));
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineShapes,
                         ::testing::Values(Layout{Placement::in_process, false, "InProcess"},
                                           Layout{Placement::in_process, true,
                                                  "InProcessColocated"},
                                           Layout{Placement::processes, true, "OneChildProcess"},
                                           Layout{Placement::processes, false, "ChildProcesses"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace omnirt::testing

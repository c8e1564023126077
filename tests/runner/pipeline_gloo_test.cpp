// A pipeline whose relay is the c10d gloo backend: one process group over the stage processes,
// loaded on demand from the c10d plugin.
#include <gtest/gtest.h>
#include <signal.h>

#include "pipeline_harness.h"
#include "testing/test_stages.h"

namespace omnirt::testing {
namespace {

const char* kGlooPipeline = R"(
name: gloo
model_path: none
relay_backend: gloo
stages:
  - {name: produce, process: a, factory: test.tensor_producer,
     factory_args: {bytes: 65536, dtype: float32}, next: pass}
  - {name: pass, process: b, factory: test.arithmetic, factory_args: {scale: 2}, next: last}
  - {name: last, process: c, factory: test.identity, terminal: true}
)";

TEST(GlooRelayPipeline, MovesTensorsBetweenStageProcesses) {
    auto started = start_pipeline(kGlooPipeline, Layout{runner::Placement::processes, false, "g"});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    for (int i = 0; i < 3; ++i) {
        auto result = (*started)->submit("gloo-" + std::to_string(i), OmniRequest{});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        const Tensor& tensor = result->data.find("tensor")->as_tensor();
        Tensor expected = *make_pattern_tensor(65536, DType::f32);
        ASSERT_EQ(tensor.numel(), expected.numel());
        for (std::int64_t k = 0; k < tensor.numel(); k += 101) {
            ASSERT_EQ(tensor.data_as<float>()[k], 2 * expected.data_as<float>()[k]) << k;
        }
    }
    std::string runtime_dir = (*started)->plan().runtime_dir;
    (*started)->stop();
    EXPECT_EQ(count_instance_segments(runtime_dir), 0);
}

TEST(GlooRelayPipeline, ADeadProcessIsNotRestartedItsStagesFailWithTheReason) {
    // A gloo world is fixed at start: a new process cannot join it, so supervision does not try.
    auto started = start_pipeline(kGlooPipeline, Layout{runner::Placement::processes, false, "g"});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    auto pids = pipeline.process_ids();
    ASSERT_EQ(::kill(pids.at("b"), SIGKILL), 0);
    ASSERT_TRUE(eventually([&] {
        for (const auto& stage : pipeline.health().stages) {
            if (stage.stage == "pass") return stage.state == pipeline::StageState::failed;
        }
        return false;
    }));
    auto health = pipeline.health();
    EXPECT_FALSE(health.live);
    EXPECT_NE(health.reason.find("stage 'pass' failed: process 'b' killed by signal 9"),
              std::string::npos)
        << health.reason;
    EXPECT_NE(health.reason.find("not restarted: relay_backend 'gloo'"), std::string::npos)
        << health.reason;
    EXPECT_EQ(pipeline.process_ids().at("b"), pids.at("b"));  // nothing was started again
    std::string runtime_dir = pipeline.plan().runtime_dir;
    pipeline.stop();
    for (const auto& [name, pid] : pids) EXPECT_FALSE(process_alive(pid)) << name;
    EXPECT_EQ(count_instance_segments(runtime_dir), 0);
}

TEST(GlooRelayPipeline, InProcessPlacementIsRefusedClearly) {
    auto started = start_pipeline(kGlooPipeline, Layout{runner::Placement::in_process, false, "g"});
    ASSERT_FALSE(started.has_value());
    EXPECT_EQ(started.error().code, ErrorCode::unimplemented);
    EXPECT_NE(started.error().message.find("child processes"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::testing

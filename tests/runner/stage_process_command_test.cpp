// Black-box tests of the hidden `omnirt stage-process` command: the real binary, started with
// run_command (exit code and stderr) or as a ChildProcess (the ready pipe on fd 3).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "config/runtime_dir.h"
#include "config/runtime_plan.h"
#include "control/control_plane.h"
#include "pipeline/stage_factory.h"
#include "relay/registry.h"
#include "runner/builtins.h"
#include "runner/child_process.h"
#include "runner/plan_codec.h"
#include "support/command.h"

namespace omnirt::runner {
namespace {

using std::chrono::milliseconds;
using testing::omnirt_binary;
using testing::run_command;

constexpr milliseconds kHangGuard{30000};

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// shm segments (/dev/shm/omnirt.*) whose name mentions `pid`.
std::vector<std::string> shm_segments_of(int pid) {
    std::vector<std::string> found;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
        std::string name = entry.path().filename().string();
        if (name.starts_with("omnirt.") && contains(name, std::to_string(pid))) {
            found.push_back(name);
        }
    }
    return found;
}

// Waits for the child to exit by itself (the hang guard only bounds a broken exit) and reaps it.
ExitStatus wait_exit(ChildProcess& child) {
    pollfd fd{child.pidfd(), POLLIN, 0};
    EXPECT_EQ(poll(&fd, 1, static_cast<int>(kHangGuard.count())), 1) << "the child did not exit";
    return child.poll_exit().value_or(ExitStatus{});
}

class StageProcessCommand : public ::testing::Test {
  protected:
    void SetUp() override {
        // The plans are made of test stages; the stage processes inherit the opt-in.
        ASSERT_TRUE(enable_test_stages().has_value());
        auto dir = config::RuntimeDirectory::create(std::filesystem::temp_directory_path());
        ASSERT_TRUE(dir.has_value()) << dir.error().message;
        runtime_dir = std::move(*dir);
        plan_path = runtime_dir->path() + "/plan.msgpack";
    }
    void TearDown() override {
        siginfo_t info{};
        errno = 0;
        int result = waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
        EXPECT_TRUE(result == -1 && errno == ECHILD) << "a child process is left";
    }

    // One process "solo" hosting one terminal test.identity stage "only".
    config::RuntimePlan one_stage_plan() {
        config::PipelineConfig pipeline;
        pipeline.name = "one-stage";
        pipeline.model_path = "none";
        config::StageConfig stage;
        stage.name = "only";
        stage.factory = "test.identity";
        stage.process = "solo";
        stage.terminal = true;
        pipeline.stages = {stage};
        auto plan = config::prepare_runtime(pipeline, {.runtime_dir = runtime_dir->path()});
        EXPECT_TRUE(plan.has_value()) << plan.error().message;
        return plan.value_or(config::RuntimePlan{});
    }

    testing::CommandResult run_stage_process(const std::string& process) {
        return run_command(
            {omnirt_binary(), "stage-process", "--plan", plan_path, "--process", process});
    }

    std::unique_ptr<ChildProcess> spawn_stage_process(const std::string& process) {
        auto child = ChildProcess::spawn(
            {.name = process,
             .binary = omnirt_binary(),
             .args = {"stage-process", "--plan", plan_path, "--process", process}});
        EXPECT_TRUE(child.has_value()) << child.error().message;
        return child ? std::move(*child) : nullptr;
    }

    std::unique_ptr<config::RuntimeDirectory> runtime_dir;
    std::string plan_path;
};

TEST_F(StageProcessCommand, MissingPlanFile) {
    auto result = run_stage_process("solo");
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(contains(result.err, "cannot read plan file '" + plan_path + "'")) << result.err;
    EXPECT_TRUE(result.out.empty());
}

TEST_F(StageProcessCommand, GarbagePlanFile) {
    std::ofstream(plan_path) << "definitely not msgpack";
    auto result = run_stage_process("solo");
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(contains(result.err, "not a valid encoding")) << result.err;
}

TEST_F(StageProcessCommand, MalformedPlanNamesTheField) {
    config::RuntimePlan plan = one_stage_plan();
    plan.stages[0].relay.credits = 0;
    ASSERT_TRUE(write_plan_file(plan, plan_path).has_value());
    auto result = run_stage_process("solo");
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(contains(result.err, "stages[0].relay.credits: must be in [1,")) << result.err;
}

TEST_F(StageProcessCommand, UnknownProcess) {
    ASSERT_TRUE(write_plan_file(one_stage_plan(), plan_path).has_value());
    auto result = run_stage_process("nope");
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(contains(result.err, "the plan has no process 'nope' (processes: solo)"))
        << result.err;
}

TEST_F(StageProcessCommand, MissingPluginFails) {
    config::RuntimePlan plan = one_stage_plan();
    plan.plugins = {runtime_dir->path() + "/missing-plugin.so"};
    ASSERT_TRUE(write_plan_file(plan, plan_path).has_value());
    auto result = run_stage_process("solo");
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(contains(result.err, "missing-plugin.so")) << result.err;
}

TEST_F(StageProcessCommand, MissingArgumentsAreUsageErrors) {
    auto result = run_command({omnirt_binary(), "stage-process", "--plan", plan_path});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_TRUE(contains(result.err, "--process")) << result.err;
}

TEST_F(StageProcessCommand, RunByHandWritesNothingToAnFd3ThatIsNotAPipe) {
    std::string fd3_file = runtime_dir->path() + "/fd3";
    auto result = run_command({"/bin/sh", "-c",
                               "exec \"$0\" stage-process --plan \"$1\" --process solo 3>\"$2\"",
                               omnirt_binary(), plan_path, fd3_file});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(contains(result.err, "cannot read plan file")) << result.err;
    EXPECT_EQ(std::filesystem::file_size(fd3_file), 0u);
}

TEST_F(StageProcessCommand, LongErrorsAreShortenedOnTheReadyPipe) {
    config::RuntimePlan plan = one_stage_plan();
    plan.stages[0].factory = std::string(10000, 'f');
    ASSERT_TRUE(write_plan_file(plan, plan_path).has_value());
    auto child = spawn_stage_process("solo");
    ASSERT_NE(child, nullptr);
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_NE(ready.error().code, ErrorCode::unavailable) << ready.error().message;
    EXPECT_TRUE(contains(ready.error().message, "fff...")) << ready.error().message.size();
    EXPECT_LT(ready.error().message.size(), 4200u);
    EXPECT_EQ(wait_exit(*child).code, 1);
}

TEST_F(StageProcessCommand, HiddenFromHelp) {
    auto result = run_command({omnirt_binary(), "--help"});
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_FALSE(contains(result.out, "stage-process"));
}

TEST_F(StageProcessCommand, FailuresReachTheParentOnTheReadyPipe) {
    auto child = spawn_stage_process("solo");
    ASSERT_NE(child, nullptr);
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    // The child's own error code and message, not just "it exited".
    EXPECT_EQ(ready.error().code, ErrorCode::not_found) << ready.error().message;
    EXPECT_TRUE(contains(ready.error().message, "process 'solo': cannot read plan file"))
        << ready.error().message;
    ExitStatus status = wait_exit(*child);
    EXPECT_TRUE(status.exited) << status.to_string();
    EXPECT_EQ(status.code, 1);
}

TEST_F(StageProcessCommand, OneStagePipelineGetsReadyAndStopsOnSigterm) {
    ASSERT_TRUE(write_plan_file(one_stage_plan(), plan_path).has_value());
    auto child = spawn_stage_process("solo");
    ASSERT_NE(child, nullptr);
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_TRUE(ready.has_value()) << ready.error().message;
    int pid = child->pid();
    ExitStatus status = child->terminate(kHangGuard);
    EXPECT_TRUE(status.exited) << status.to_string();
    EXPECT_EQ(status.code, 0);
    EXPECT_TRUE(shm_segments_of(pid).empty());
}

TEST_F(StageProcessCommand, StageHostFailuresNameTheStage) {
    config::RuntimePlan plan = one_stage_plan();
    plan.stages[0].factory = "no.such.factory";
    ASSERT_TRUE(write_plan_file(plan, plan_path).has_value());
    auto child = spawn_stage_process("solo");
    ASSERT_NE(child, nullptr);
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_TRUE(contains(ready.error().message, "no.such.factory")) << ready.error().message;
    EXPECT_TRUE(contains(ready.error().message, "only")) << ready.error().message;
    ExitStatus status = wait_exit(*child);
    EXPECT_TRUE(status.exited) << status.to_string();
    EXPECT_EQ(status.code, 1);
}

TEST_F(StageProcessCommand, OneStagePipelineStopsOnAShutdownMessage) {
    config::RuntimePlan plan = one_stage_plan();
    ASSERT_TRUE(write_plan_file(plan, plan_path).has_value());
    auto child = spawn_stage_process("solo");
    ASSERT_NE(child, nullptr);
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_TRUE(ready.has_value()) << ready.error().message;
    auto control = control::ControlPlane::create();
    ASSERT_TRUE(control.has_value());
    ASSERT_TRUE((*control)->start().has_value());
    ASSERT_TRUE((*control)
                    ->send(plan.stages[0].endpoint, proto::ShutdownMessage{.reason = "test"})
                    .has_value());
    // It exits by itself.
    ExitStatus status = wait_exit(*child);
    EXPECT_TRUE(status.exited) << status.to_string();
    EXPECT_EQ(status.code, 0);
    (*control)->stop();
}

TEST(RegisterBuiltins, IsIdempotentAndRegistersTheTestStagesOnlyOnTheOptIn) {
    ASSERT_EQ(::unsetenv(kTestStagesEnv), 0);
    ASSERT_TRUE(register_builtins().has_value());
    ASSERT_TRUE(register_builtins().has_value());
    auto backends = relay::registered_backends();
    EXPECT_NE(std::find(backends.begin(), backends.end(), "shm"), backends.end());
    EXPECT_TRUE(Registry::global().contains(FunctionKind::factory, "demo.thinker"));
    EXPECT_FALSE(test_stages_enabled());
    auto missing = pipeline::find_stage_factory("test.identity");
    ASSERT_FALSE(missing.has_value());
    EXPECT_TRUE(contains(missing.error().message, "unknown factory 'test.identity'"))
        << missing.error().message;
    EXPECT_TRUE(contains(missing.error().message, "OMNIRT_TEST_STAGES=1"))
        << missing.error().message;

    ASSERT_TRUE(enable_test_stages().has_value());
    EXPECT_TRUE(test_stages_enabled());  // and so in the stage processes this one starts
    EXPECT_TRUE(pipeline::find_stage_factory("test.identity").has_value());
    EXPECT_TRUE(Registry::global().contains(FunctionKind::merge, "test.merge"));
}

}  // namespace
}  // namespace omnirt::runner

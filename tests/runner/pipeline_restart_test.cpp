// Self-healing stage processes: a stage process killed under load fails its requests at once and
// comes back; a crash loop exhausts the restart budget and fails for good; requests that never
// pass through the dead stage go on; nothing is left behind. Every wait is on a condition, with a
// generous timeout as a hang guard only.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "pipeline_harness.h"

namespace omnirt::testing {
namespace {

using runner::Placement;
using Kind = pipeline::RequestEvent::Kind;
using pipeline::StageState;

constexpr std::chrono::milliseconds kHangGuard(60000);

const Layout kProcesses{Placement::processes, false, "restart"};

pipeline::StageHealth stage_health(const pipeline::HealthReport& report, const std::string& stage) {
    for (const auto& entry : report.stages) {
        if (entry.stage == stage) return entry;
    }
    ADD_FAILURE() << "no stage '" << stage << "' in the health report";
    return {};
}

StageState state_of(runner::Pipeline& pipeline, const std::string& stage) {
    return stage_health(pipeline.health(), stage).state;
}

TEST(PipelineRestart, AKilledStageFailsItsRequestsAndComesBackServing) {
    auto started = start_pipeline(R"(
name: heal
model_path: none
restart: {max_restarts: 3, window_s: 600, backoff_initial_ms: 10, backoff_max_ms: 100}
stages:
  - {name: front, process: a, factory: test.identity, next: mid}
  - {name: mid, process: b, factory: test.sleep, factory_args: {ms: 600000}, next: last}
  - {name: last, process: a, factory: test.identity, terminal: true}
)",
                                  kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    const int dead_pid = pipeline.process_ids().at("b");
    const int front_pid = pipeline.process_ids().at("a");

    constexpr int kLoad = 20;
    Outcomes outcomes;
    for (int i = 0; i < kLoad; ++i) {
        Status accepted = pipeline.coordinator().start_request("load-" + std::to_string(i),
                                                               OmniRequest{.inputs = Map{{"i", i}}},
                                                               {}, outcomes.callback());
        ASSERT_TRUE(accepted.has_value()) << accepted.error().to_string();
    }
    // The sleeping stage holds work when it dies.
    ASSERT_TRUE(eventually(
        [&] {
            auto mid = stage_health(pipeline.health(), "mid");
            return mid.active_requests + mid.queue_depth > 0;
        },
        kHangGuard));
    ASSERT_EQ(::kill(dead_pid, SIGKILL), 0);

    ASSERT_TRUE(outcomes.wait_for(kLoad));
    for (const auto& event : outcomes.events()) {
        EXPECT_EQ(event.kind, Kind::failed) << event.request_id;
        EXPECT_EQ(event.error.code, ErrorCode::unavailable) << event.error.to_string();
        EXPECT_NE(event.error.message.find("stage 'mid' is down"), std::string::npos)
            << event.error.message;
        EXPECT_NE(event.error.message.find("killed by signal 9"), std::string::npos)
            << event.error.message;
    }
    EXPECT_EQ(pipeline.coordinator().live_requests(), 0u);

    ASSERT_TRUE(eventually([&] { return pipeline.health().healthy; }, kHangGuard))
        << pipeline.health().reason;
    const int new_pid = pipeline.process_ids().at("b");
    EXPECT_NE(new_pid, dead_pid);
    EXPECT_EQ(pipeline.process_ids().at("a"), front_pid);  // the other group kept running
    auto health = pipeline.health();
    EXPECT_EQ(stage_health(health, "mid").state, StageState::running);
    EXPECT_EQ(stage_health(health, "mid").restarts, 1);
    EXPECT_EQ(stage_health(health, "mid").pid, new_pid);
    EXPECT_EQ(stage_health(health, "front").restarts, 0);

    // The new incarnation serves, with correct results.
    for (int i = 0; i < 5; ++i) {
        auto result =
            pipeline.submit("after-" + std::to_string(i),
                            OmniRequest{.inputs = Map{{"i", i}}, .params = Map{{"sleep_ms", 0}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, Value(Map{{"i", i}}));
    }
    // The id of a request that died with the stage is not reused.
    auto reused = pipeline.submit("load-0", OmniRequest{.params = Map{{"sleep_ms", 0}}});
    ASSERT_FALSE(reused.has_value());
    EXPECT_EQ(reused.error().code, ErrorCode::already_exists);

    expect_nothing_left(pipeline, {dead_pid, new_pid, front_pid});
}

// Which process group dies, and one of its stages.
struct Victim {
    std::string process;
    std::string stage;
};

class PipelineRestartVictims : public ::testing::TestWithParam<Victim> {};

TEST_P(PipelineRestartVictims, ClientsSubmittingThroughARestartGetAnAnswerOrAClearErrorNeverAHang) {
    const Victim& victim = GetParam();
    auto started = start_pipeline(R"(
name: steady-clients
model_path: none
restart: {backoff_initial_ms: 20}
stages:
  - {name: front, process: a, factory: test.identity, next: mid}
  - {name: mid, process: b, factory: test.identity, next: last}
  - {name: last, process: a, factory: test.identity, terminal: true}
)",
                                  kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    const int dead_pid = pipeline.process_ids().at(victim.process);

    std::mutex mutex;
    std::condition_variable changed;
    int served = 0;
    std::vector<Error> errors;
    bool quit = false;
    std::thread client([&] {
        for (int i = 0;; ++i) {
            {
                std::lock_guard lock(mutex);
                if (quit) return;
            }
            // The deadline is a hang guard: a request that neither completes nor fails by then
            // is the bug this test looks for.
            auto result =
                pipeline.submit("steady-" + std::to_string(i), OmniRequest{.inputs = Map{{"i", i}}},
                                {.deadline = std::chrono::system_clock::now() + kHangGuard});
            std::lock_guard lock(mutex);
            if (result.has_value() && result->data == Value(Map{{"i", i}})) {
                ++served;
            } else {
                errors.push_back(result.has_value() ? Error{ErrorCode::internal, "wrong result"}
                                                    : result.error());
            }
            changed.notify_all();
        }
    });
    auto wait_served = [&](int count) {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, kHangGuard, [&] { return served >= count; });
    };
    EXPECT_TRUE(wait_served(3));
    ASSERT_EQ(::kill(dead_pid, SIGKILL), 0);
    EXPECT_TRUE(eventually(
        [&] {
            auto health = pipeline.health();
            return health.healthy && stage_health(health, victim.stage).restarts == 1;
        },
        kHangGuard));
    int before = 0;
    {
        std::lock_guard lock(mutex);
        before = served;
    }
    EXPECT_TRUE(wait_served(before + 3));  // served again after the restart
    {
        std::lock_guard lock(mutex);
        quit = true;
    }
    client.join();
    for (const auto& error : errors) {
        EXPECT_EQ(error.code, ErrorCode::unavailable) << error.to_string();
        // "stages 'front', 'last' are down: process 'a' killed by signal 9 ...", "pipeline
        // unavailable: stage 'last' is restarting: process 'a' killed by signal 9 ..." (while
        // the process restarts, each of its stages is back with its own first heartbeat).
        EXPECT_NE(error.message.find("stage"), std::string::npos) << error.to_string();
        EXPECT_NE(error.message.find("process '" + victim.process + "' killed by signal 9"),
                  std::string::npos)
            << error.to_string();
    }
    auto pids = pipeline.process_ids();
    expect_nothing_left(pipeline, {dead_pid, pids.at("a"), pids.at("b")});
}

// b hosts the middle stage; a the entry and the terminal stage (the coordinator's own peers).
INSTANTIATE_TEST_SUITE_P(Processes, PipelineRestartVictims,
                         ::testing::Values(Victim{"b", "mid"}, Victim{"a", "last"}),
                         [](const auto& info) { return "Kill_" + info.param.process; });

TEST(PipelineRestart, DuringTheBackOffNewRequestsFailFastNamingTheStage) {
    // A back-off of an hour: the stage stays `restarting` for the whole test, and stop() must
    // not wait for it.
    auto started = start_pipeline(R"(
name: backoff
model_path: none
restart: {backoff_initial_ms: 3600000, backoff_max_ms: 3600000}
stages:
  - {name: front, process: a, factory: test.identity, next: mid}
  - {name: mid, process: b, factory: test.identity, next: last}
  - {name: last, process: a, factory: test.identity, terminal: true}
)",
                                  kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    auto pids = pipeline.process_ids();
    ASSERT_EQ(::kill(pids.at("b"), SIGKILL), 0);
    ASSERT_TRUE(eventually([&] { return state_of(pipeline, "mid") == StageState::restarting; },
                           kHangGuard));
    auto refused = pipeline.submit("during", OmniRequest{});
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find("stage 'mid' is restarting"), std::string::npos)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("restart 1 of 3"), std::string::npos)
        << refused.error().message;
    auto health = pipeline.health();
    EXPECT_FALSE(health.healthy);
    EXPECT_NE(health.reason.find("stage 'mid' is restarting"), std::string::npos) << health.reason;
    EXPECT_EQ(stage_health(health, "mid").restarts, 1);
    EXPECT_FALSE(stage_health(health, "mid").alive);
    expect_nothing_left(pipeline, {pids.at("a"), pids.at("b")});
}

TEST(PipelineRestart, ACrashLoopExhaustsTheBudgetAndFailsForGood) {
    std::string crash_dir = ::testing::TempDir() + "omnirt-crash-loop-XXXXXX";
    ASSERT_NE(::mkdtemp(crash_dir.data()), nullptr);
    const std::string crash_file = crash_dir + "/crash";
    auto started = start_pipeline(R"(
name: crash-loop
model_path: none
restart: {max_restarts: 2, window_s: 600, backoff_initial_ms: 1, backoff_max_ms: 10}
stages:
  - {name: front, process: a, factory: test.identity, next: crasher}
  - {name: crasher, process: b, factory: test.crash,
     factory_args: {crash_at_start_if_exists: ")" +
                                      crash_file +
                                      R"("}, next: last}
  - {name: last, process: a, factory: test.identity, terminal: true}
)",
                                  kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    auto pids = pipeline.process_ids();
    // From now on every new incarnation of `crasher` dies while it starts.
    std::ofstream(crash_file) << "crash\n";

    auto crashed =
        pipeline.submit("crash-1", OmniRequest{.params = Map{{"crash_stage", "crasher"}}});
    ASSERT_FALSE(crashed.has_value());
    EXPECT_EQ(crashed.error().code, ErrorCode::unavailable);
    EXPECT_NE(crashed.error().message.find("crasher"), std::string::npos)
        << crashed.error().message;
    EXPECT_NE(crashed.error().message.find("exited with code 77"), std::string::npos)
        << crashed.error().message;

    ASSERT_TRUE(eventually([&] { return state_of(pipeline, "crasher") == StageState::failed; },
                           kHangGuard));
    auto health = pipeline.health();
    EXPECT_FALSE(health.healthy);
    EXPECT_EQ(stage_health(health, "crasher").restarts, 2);
    const std::string expected = "stage 'crasher' failed: restarted 2 times within 600 s; last: ";
    EXPECT_EQ(health.reason.rfind(expected, 0), 0u) << health.reason;
    EXPECT_NE(health.reason.find("exited with code 78"), std::string::npos) << health.reason;
    auto refused = pipeline.submit("after-loop", OmniRequest{});
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find(expected), std::string::npos) << refused.error().message;

    expect_nothing_left(pipeline, {pids.at("a"), pids.at("b")});
    std::filesystem::remove_all(crash_dir);
}

TEST(PipelineRestart, RequestsThatNeverPassThroughTheDeadStageGoOn) {
    auto started = start_pipeline(R"(
name: branches
model_path: none
terminal_stages_fn: test.terminal_from_params
restart: {backoff_initial_ms: 3600000, backoff_max_ms: 3600000}
stages:
  - {name: src, process: a, factory: test.identity, next: [left, right],
     route_fn: test.route_from_params}
  - {name: left, process: a, factory: test.sleep, factory_args: {ms: 0, worker_threads: 2},
     terminal: true}
  - {name: right, process: b, factory: test.sleep, factory_args: {ms: 0}, terminal: true}
)",
                                  kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    auto pids = pipeline.process_ids();
    auto branch = [](const std::string& stage, int sleep_ms) {
        return OmniRequest{.inputs = Value(stage),
                           .params = Map{{"route", List{Value(stage)}},
                                         {"terminal_stages", List{Value(stage)}},
                                         {"sleep_ms", sleep_ms}}};
    };
    auto held_left = pipeline.stream("held-left", branch("left", 600000));
    ASSERT_TRUE(held_left.has_value()) << held_left.error().to_string();
    auto held_right = pipeline.stream("held-right", branch("right", 600000));
    ASSERT_TRUE(held_right.has_value()) << held_right.error().to_string();
    ASSERT_TRUE(eventually(
        [&] {
            auto health = pipeline.health();
            return stage_health(health, "left").active_requests > 0 &&
                   stage_health(health, "right").active_requests > 0;
        },
        kHangGuard));

    ASSERT_EQ(::kill(pids.at("b"), SIGKILL), 0);
    auto ended = (*held_right)->next(kHangGuard);
    ASSERT_TRUE(ended.has_value() && ended->has_value());
    EXPECT_EQ((*ended)->kind, Kind::failed);
    EXPECT_NE((*ended)->error.message.find("stage 'right' is down"), std::string::npos)
        << (*ended)->error.message;

    // The left branch never touches `right`: its held request lives on, new ones are served.
    EXPECT_EQ(pipeline.coordinator().live_requests(), 1u);
    auto served = pipeline.submit("quick-left", branch("left", 0));
    ASSERT_TRUE(served.has_value()) << served.error().to_string();
    EXPECT_EQ(served->data, Value("left"));
    auto refused = pipeline.submit("quick-right", branch("right", 0));
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().message.find("stage 'right' is restarting"), std::string::npos)
        << refused.error().message;
    ASSERT_TRUE(pipeline.abort("held-left", "test done").has_value());
    auto aborted = (*held_left)->next(kHangGuard);
    ASSERT_TRUE(aborted.has_value() && aborted->has_value());
    EXPECT_EQ((*aborted)->kind, Kind::aborted);

    expect_nothing_left(pipeline, {pids.at("a"), pids.at("b")});
}

}  // namespace
}  // namespace omnirt::testing

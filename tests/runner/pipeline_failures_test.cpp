// Failure paths of a running pipeline: aborts in the middle of a stream, a crashed stage
// process, a fan-in that never completes, a failing stage, deadlines, and load.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>

#include "pipeline_harness.h"

namespace omnirt::testing {
namespace {

using runner::Placement;
using Kind = pipeline::RequestEvent::Kind;

class PipelineFailures : public ::testing::TestWithParam<Layout> {
  protected:
    std::string p(const std::string& process) const { return process_name(GetParam(), process); }
    std::unique_ptr<runner::Pipeline> start(const std::string& yaml) {
        auto pipeline = start_pipeline(yaml, GetParam());
        EXPECT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
        if (!pipeline) return nullptr;
        return std::move(*pipeline);
    }
};

TEST_P(PipelineFailures, AbortInTheMiddleOfAStreamReleasesEveryStage) {
    // The streamer's chunks and done signal reach the collector at once; its payload waits in
    // the sleeping stage, so the request is mid-stream when the client aborts.
    auto pipeline = start(R"(
name: abort-stream
model_path: none
stages:
  - {name: streamer, process: )" +
                          p("a") + R"(, factory: test.token_streamer,
     factory_args: {tokens: 3}, next: slow, stream_to: [collector]}
  - {name: slow, process: )" +
                          p("b") + R"(, factory: test.sleep, factory_args: {ms: 600000},
     next: collector}
  - {name: collector, process: )" +
                          p("c") + R"(, factory: test.stream_collector,
     factory_args: {forward: true}, terminal: true}
)");
    ASSERT_TRUE(pipeline);
    auto stream = pipeline->stream("abort-1", OmniRequest{});
    ASSERT_TRUE(stream.has_value()) << stream.error().to_string();
    int collector_chunks = 0;
    while (collector_chunks < 3) {
        auto event = (*stream)->next(std::chrono::milliseconds(30000));
        ASSERT_TRUE(event.has_value() && event->has_value());
        ASSERT_FALSE((*event)->terminal()) << (*event)->error.to_string();
        if ((*event)->from_stage == "collector") ++collector_chunks;
    }
    ASSERT_TRUE(pipeline->abort("abort-1", "client went away").has_value());
    std::optional<pipeline::RequestEvent> end;
    while (!end) {
        auto event = (*stream)->next(std::chrono::milliseconds(30000));
        ASSERT_TRUE(event.has_value() && event->has_value());
        if ((*event)->terminal()) end = **event;
    }
    EXPECT_EQ(end->kind, Kind::aborted);
    EXPECT_EQ(end->error.code, ErrorCode::aborted);
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
    EXPECT_EQ(pipeline->coordinator().live_requests(), 0u);
    // The pipeline still serves (the sleeping stage was woken by the abort).
    auto again = pipeline->stream("abort-2", OmniRequest{});
    ASSERT_TRUE(again.has_value());
    ASSERT_TRUE(pipeline->abort("abort-2", "done").has_value());
}

TEST_P(PipelineFailures, StageErrorFailsTheRequestAndAbortsItEverywhere) {
    auto pipeline = start(R"(
name: stage-error
model_path: none
stages:
  - {name: src, process: )" +
                          p("a") + R"(, factory: test.identity, next: [boom, join]}
  - {name: boom, process: )" +
                          p("b") + R"(, factory: test.fail, next: join}
  - {name: join, process: )" +
                          p("c") + R"(, factory: test.identity, wait_for: [src, boom],
     merge_fn: test.merge, terminal: true}
)");
    ASSERT_TRUE(pipeline);
    auto failed = pipeline->submit("err-1", OmniRequest{.params = Map{{"fail_stage", "boom"}}});
    ASSERT_FALSE(failed.has_value());
    EXPECT_NE(failed.error().message.find("boom"), std::string::npos) << failed.error().message;
    EXPECT_NE(failed.error().message.find("test.fail"), std::string::npos);
    // join held src's payload for the request: the abort broadcast released it.
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
    auto ok = pipeline->submit("ok-1", OmniRequest{.inputs = Map{{"x", 1}}});
    ASSERT_TRUE(ok.has_value()) << ok.error().to_string();
}

TEST_P(PipelineFailures, FanInTimeoutFailsTheRequestInsteadOfLeakingIt) {
    auto pipeline = start(R"(
name: fan-in-timeout
model_path: none
stages:
  - {name: src, process: )" +
                          p("a") + R"(, factory: test.identity, next: [never, join],
     route_fn: test.route_from_params}
  - {name: never, process: )" +
                          p("b") + R"(, factory: test.identity, next: join}
  - {name: join, process: )" +
                          p("c") + R"(, factory: test.identity, wait_for: [src, never],
     merge_fn: test.merge, terminal: true, fan_in_timeout_s: 0.2}
)");
    ASSERT_TRUE(pipeline);
    auto result =
        pipeline->submit("timeout-1", OmniRequest{.params = Map{{"route", List{"join"}}}});
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::deadline_exceeded) << result.error().to_string();
    EXPECT_NE(result.error().message.find("never"), std::string::npos) << result.error().message;
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
}

TEST_P(PipelineFailures, DeadlineFailsARequestStuckInAStage) {
    auto pipeline = start(R"(
name: deadline
model_path: none
stages:
  - {name: slow, process: )" +
                          p("a") + R"(, factory: test.sleep, factory_args: {ms: 600000},
     terminal: true}
)");
    ASSERT_TRUE(pipeline);
    auto result = pipeline->submit(
        "deadline-1", OmniRequest{},
        {.deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(100)});
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::deadline_exceeded);
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
}

TEST_P(PipelineFailures, AThousandConcurrentRequestsCompleteExactlyOnce) {
    auto pipeline = start(R"(
name: load
model_path: none
stages:
  - {name: produce, process: )" +
                          p("a") + R"(, factory: test.tensor_producer,
     factory_args: {bytes: 4096}, next: pass}
  - {name: pass, process: )" +
                          p("b") + R"(, factory: test.identity, next: last}
  - {name: last, process: )" +
                          p("c") + R"(, factory: test.identity, terminal: true}
)");
    ASSERT_TRUE(pipeline);
    constexpr int kRequests = 1000;
    std::mutex mutex;
    std::condition_variable done;
    std::multiset<std::string> completed;
    int failures = 0;
    for (int i = 0; i < kRequests; ++i) {
        std::string id = "load-" + std::to_string(i);
        Status started = pipeline->coordinator().start_request(
            id, OmniRequest{.inputs = Map{{"i", i}}}, {}, [&, id, i](pipeline::RequestEvent event) {
                if (!event.terminal()) return;
                std::lock_guard lock(mutex);
                const Value* input = event.result.data.find("input");
                if (event.kind != Kind::completed || input == nullptr ||
                    *input != Value(Map{{"i", i}})) {
                    ++failures;
                }
                completed.insert(id);
                done.notify_all();
            });
        ASSERT_TRUE(started.has_value()) << started.error().to_string();
    }
    std::unique_lock lock(mutex);
    ASSERT_TRUE(done.wait_for(lock, std::chrono::seconds(120),
                              [&] { return completed.size() == kRequests; }));
    EXPECT_EQ(failures, 0);
    std::set<std::string> unique(completed.begin(), completed.end());
    EXPECT_EQ(unique.size(), static_cast<std::size_t>(kRequests));
    lock.unlock();
    EXPECT_EQ(pipeline->coordinator().live_requests(), 0u);
    EXPECT_TRUE(eventually([&] { return all_stages_idle(*pipeline); }));
    std::string runtime_dir = pipeline->plan().runtime_dir;
    pipeline->stop();
    EXPECT_EQ(count_instance_segments(runtime_dir), 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineFailures,
                         ::testing::Values(Layout{Placement::in_process, false, "InProcess"},
                                           Layout{Placement::in_process, true,
                                                  "InProcessColocated"},
                                           Layout{Placement::processes, false, "ChildProcesses"}),
                         [](const auto& info) { return info.param.name; });

TEST(PipelineSupervision, WithoutRestartsACrashedStageFailsItsRequestsForGood) {
    auto started = start_pipeline(R"(
name: crash
model_path: none
restart: {max_restarts: 0}
stages:
  - {name: front, process: front, factory: test.identity, next: crasher}
  - {name: crasher, process: back, factory: test.crash, next: last}
  - {name: last, process: front, factory: test.identity, terminal: true}
)",
                                  Layout{Placement::processes, false, "crash"});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = *started;
    auto ok = pipeline->submit("fine-1", OmniRequest{});
    ASSERT_TRUE(ok.has_value()) << ok.error().to_string();
    int back_pid = pipeline->process_ids().at("back");

    auto crashed =
        pipeline->submit("crash-1", OmniRequest{.params = Map{{"crash_stage", "crasher"}}});
    ASSERT_FALSE(crashed.has_value());
    EXPECT_EQ(crashed.error().code, ErrorCode::unavailable) << crashed.error().to_string();
    EXPECT_NE(crashed.error().message.find("crasher"), std::string::npos)
        << crashed.error().message;
    EXPECT_NE(crashed.error().message.find("77"), std::string::npos) << crashed.error().message;
    auto health = pipeline->health();
    EXPECT_FALSE(health.healthy);
    EXPECT_EQ(health.reason,
              "stage 'crasher' failed: process 'back' exited with code 77; not restarted "
              "(restart.max_restarts is 0)");
    auto rejected = pipeline->submit("after-crash", OmniRequest{});
    ASSERT_FALSE(rejected.has_value());
    EXPECT_EQ(rejected.error().code, ErrorCode::unavailable);
    EXPECT_NE(rejected.error().message.find(health.reason), std::string::npos)
        << rejected.error().message;

    std::string runtime_dir = pipeline->plan().runtime_dir;
    auto pids = pipeline->process_ids();
    pipeline->stop();
    EXPECT_FALSE(process_alive(back_pid));
    for (const auto& [name, pid] : pids) EXPECT_FALSE(process_alive(pid)) << name;
    EXPECT_EQ(count_instance_segments(runtime_dir), 0);
    EXPECT_FALSE(std::filesystem::exists(runtime_dir));
}

TEST(PipelineRelay, AStageMayHoldAZeroCopyInputLongerThanTheRelayTimeout) {
    // `slow` keeps its zero-copy view of produce's 1 MiB tensor for 4.5 s, three times the
    // relay timeout: the sender waits for delivery, not for the view to go. (The timeout is long
    // enough for a loaded machine to deliver within it.)
    auto started = start_pipeline(R"(
name: long-hold
model_path: none
stages:
  - {name: produce, process: a, factory: test.tensor_producer, factory_args: {bytes: 1048576},
     next: slow}
  - {name: slow, process: b, factory: test.sleep, factory_args: {ms: 4500}, next: last}
  - {name: last, process: b, factory: test.sink, terminal: true}
)",
                                  Layout{Placement::in_process, false, "hold"},
                                  {.relay_timeout = std::chrono::milliseconds(1500)});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto result = (*started)->submit("hold-1", OmniRequest{});
    ASSERT_TRUE(result.has_value()) << result.error().to_string();
    EXPECT_EQ(*result->data.find("tensor_bytes"), Value(1048576));
}

TEST(PipelineStartup, AFailingFactoryReportsTheStageAndLeavesNothingRunning) {
    auto started = start_pipeline(R"(
name: bad-args
model_path: none
stages:
  - {name: produce, process: a, factory: test.tensor_producer, factory_args: {bytes: "lots"},
     terminal: true}
)",
                                  Layout{Placement::processes, false, "bad"});
    ASSERT_FALSE(started.has_value());
    EXPECT_NE(started.error().message.find("produce"), std::string::npos)
        << started.error().message;
    EXPECT_NE(started.error().message.find("bytes"), std::string::npos) << started.error().message;
}

TEST(PipelineStop, CallsAfterStopAreRefusedNotCrashes) {
    auto started = start_pipeline(R"(
name: stopped
model_path: none
stages:
  - {name: only, process: a, factory: test.identity, terminal: true}
)",
                                  Layout{Placement::in_process, false, "stopped"});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    pipeline.stop();
    pipeline.stop();  // idempotent
    auto submitted = pipeline.submit("late", OmniRequest{.inputs = 1});
    ASSERT_FALSE(submitted.has_value());
    EXPECT_EQ(submitted.error().code, ErrorCode::unavailable);
    auto started_request = pipeline.coordinator().start_request("late2", OmniRequest{}, {},
                                                                [](pipeline::RequestEvent) {});
    ASSERT_FALSE(started_request.has_value());
    EXPECT_EQ(started_request.error().code, ErrorCode::unavailable);
    EXPECT_FALSE(pipeline.abort("late", "x").has_value());
    EXPECT_FALSE(pipeline.health().healthy);
}

}  // namespace
}  // namespace omnirt::testing

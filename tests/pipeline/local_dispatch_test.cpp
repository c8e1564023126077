// LocalDispatcher: registration, fallback for unknown targets, and delivery into a stage.
#include "pipeline/local_dispatch.h"

#include <gtest/gtest.h>

#include "pipeline/fake_coordinator.h"

namespace omnirt::pipeline::testing {
namespace {

constexpr const char* kPair = R"(
model_path: /models/test
stages:
  - name: a
    process: p
    factory: h2test.stage
    next: b
    stream_to: [b]
  - name: b
    process: p
    factory: h2test.stage
    terminal: true
)";

TEST(LocalDispatcher, UnknownTargetsFallBack) {
    LocalDispatcher local;
    EXPECT_FALSE(local.has("x"));
    EXPECT_FALSE(local.send_payload("x", "a", std::make_shared<const StagePayload>()));
    EXPECT_FALSE(local.send_stream_chunk("x", "a", "r", std::make_shared<const StreamChunk>()));
    EXPECT_FALSE(local.send_stream_signal("x", "a", "r", true, std::nullopt));
    local.remove("x");  // unknown: no-op
}

TEST(LocalDispatcher, DeliversPayloadsChunksAndSignalsToARegisteredStage) {
    std::size_t threads_before = thread_count();
    {
        TestPlan plan = make_plan(kPair);
        ASSERT_TRUE(plan.plan);
        auto coordinator = FakeCoordinator::create(*plan.plan);
        LocalDispatcher local;
        auto b = start_stage(plan, "b", {.handler = FakeScheduler::hold(), .local = &local});
        ASSERT_TRUE(local.has("b"));
        auto chunk = std::make_shared<const StreamChunk>(StreamChunk{.chunk_id = 0, .chunk = 5});
        EXPECT_TRUE(local.send_stream_chunk("b", "a", "r", chunk));
        EXPECT_TRUE(local.send_stream_signal("b", "a", "r", true, std::nullopt));
        auto payload =
            std::make_shared<const StagePayload>(StagePayload{.request_id = "r", .data = 1});
        EXPECT_TRUE(local.send_payload("b", "a", payload));
        ASSERT_TRUE(b.scheduler->wait_received_for("r", 3));
        auto received = b.scheduler->received_for("r");
        EXPECT_EQ(received[0].kind, IncomingKind::stream_chunk);
        EXPECT_EQ(received[0].chunk.get(), chunk.get());  // by reference
        EXPECT_EQ(received[1].kind, IncomingKind::stream_done);
        EXPECT_EQ(received[2].kind, IncomingKind::new_request);
        EXPECT_EQ(received[2].payload.get(), payload.get());
        EXPECT_EQ(received[2].from_stage, "a");
        // A stream error drops the request in b.
        EXPECT_TRUE(local.send_stream_signal("b", "a", "r", false, "upstream failed"));
        ASSERT_TRUE(b.scheduler->wait_aborted("r"));
        b.stage->stop();
        EXPECT_FALSE(local.has("b"));
        EXPECT_FALSE(local.send_payload("b", "a", payload));
    }
    EXPECT_TRUE(shm_segments_of_this_process().empty());
    EXPECT_TRUE(thread_count_settles_to(threads_before));
}

}  // namespace
}  // namespace omnirt::pipeline::testing

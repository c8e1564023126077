// Streaming between stages: chunks, done and the payload arrive in order (relay and local
// dispatch), client streams get chunk indexes, bad targets fail, chunks of aborted requests are
// released (the sender's credit comes back), stream errors drop the request downstream, and
// stream_done_to_fn picks the done targets.
#include <gtest/gtest.h>

#include "pipeline/fake_coordinator.h"
#include "pipeline/relay_io.h"
#include "pipeline/stage.h"
#include "relay/registry.h"

namespace omnirt::pipeline::testing {
namespace {

constexpr const char* kStreaming = R"(
model_path: /models/test
stages:
  - name: a
    process: pa
    factory: h2test.stage
    next: b
    stream_to: [b]
    relay: {slot_size_mb: 1, credits: 1}
  - name: b
    process: pb
    factory: h2test.stage
    terminal: true
)";

class StageStreamTest : public ::testing::Test {
  protected:
    void SetUp() override { threads_before_ = thread_count(); }
    void TearDown() override {
        EXPECT_TRUE(shm_segments_of_this_process().empty());
        EXPECT_TRUE(thread_count_settles_to(threads_before_)) << thread_names();
    }
    std::size_t threads_before_ = 0;
};

// Emits three chunks (a tensor chunk, tensor metadata) to b, then the result.
void stream_three_then_result(const IncomingMessage& message, FakeScheduler& self) {
    if (message.kind != IncomingKind::new_request) return;
    for (int i = 0; i < 3; ++i) {
        self.emit_stream(message.request_id,
                         Map{{"i", i}, {"hidden", tensor_payload("", 100000).data["tensor"]}}, "b",
                         Map{{"codes", Tensor::from_vector(std::vector<std::int32_t>{i})}});
    }
    self.emit_result(message.request_id, *message.payload);
}

void expect_chunks_done_payload(const std::vector<IncomingMessage>& received) {
    ASSERT_EQ(received.size(), 5u);
    for (int i = 0; i < 3; ++i) {
        const IncomingMessage& m = received[i];
        ASSERT_EQ(m.kind, IncomingKind::stream_chunk) << i;
        EXPECT_EQ(m.from_stage, "a");
        EXPECT_EQ(m.chunk->chunk_id, i);
        EXPECT_EQ(*m.chunk->chunk.find("i"), Value(i));
        EXPECT_TRUE(has_pattern(m.chunk->chunk.find("hidden")->as_tensor(), 100000));
        EXPECT_EQ(m.chunk->metadata,
                  Value(Map{{"codes", Tensor::from_vector(std::vector<std::int32_t>{i})}}));
    }
    EXPECT_EQ(received[3].kind, IncomingKind::stream_done);
    EXPECT_EQ(received[3].from_stage, "a");
    EXPECT_EQ(received[4].kind, IncomingKind::new_request);
}

TEST_F(StageStreamTest, ChunksDoneAndPayloadArriveInOrderThroughTheRelay) {
    TestPlan plan = make_plan(kStreaming);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto a = start_stage(plan, "a", {.handler = stream_three_then_result});
    auto b = start_stage(plan, "b");
    ASSERT_TRUE(coordinator->submit("a", "r", Map{{"q", 1}}).has_value());
    auto complete = coordinator->wait_complete("r");
    ASSERT_TRUE(complete && complete->ok);
    // One credit at a: every chunk had to be read (copied) by b before the next could go.
    expect_chunks_done_payload(b.scheduler->received_for("r"));
    EXPECT_EQ(a.stage->stats().relay_puts, 3);
    EXPECT_EQ(b.stage->stats().relay_gets, 3);
}

TEST_F(StageStreamTest, ChunksDoneAndPayloadArriveInOrderThroughLocalDispatch) {
    TestPlan plan = make_plan(kStreaming);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    LocalDispatcher local;
    auto a = start_stage(plan, "a", {.handler = stream_three_then_result, .local = &local});
    auto b = start_stage(plan, "b", {.local = &local});
    ASSERT_TRUE(coordinator->submit("a", "r", Map{}).has_value());
    ASSERT_TRUE(coordinator->wait_complete("r").has_value());
    expect_chunks_done_payload(b.scheduler->received_for("r"));
    EXPECT_EQ(a.stage->stats().relay_puts, 0);
    EXPECT_EQ(a.stage->stats().local_dispatches, 5);  // 3 chunks, done, payload
}

TEST_F(StageStreamTest, ChunksKeepTheirOrderWhetherTheOutputThreadOrTheSchedulerSendsThem) {
    TestPlan plan = make_plan(kStreaming);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    // Chunks with tensors go through the relay (the output thread, one credit: each waits for
    // b's read); chunks without are sent by the emitting thread when nothing is queued before
    // them. Alternating the two must not reorder them.
    constexpr int kChunks = 24;
    auto alternate = [](const IncomingMessage& message, FakeScheduler& self) {
        if (message.kind != IncomingKind::new_request) return;
        for (int i = 0; i < kChunks; ++i) {
            Map chunk{{"i", i}};
            if (i % 2 == 0) chunk["hidden"] = tensor_payload("", 50000).data["tensor"];
            self.emit_stream(message.request_id, std::move(chunk), "b");
        }
        self.emit_result(message.request_id, *message.payload);
    };
    auto a = start_stage(plan, "a", {.handler = alternate});
    auto b = start_stage(plan, "b");
    for (const char* id : {"r1", "r2"}) {
        ASSERT_TRUE(coordinator->submit("a", id, Map{}).has_value());
        ASSERT_TRUE(coordinator->wait_complete(id).has_value());
        auto received = b.scheduler->received_for(id);
        ASSERT_EQ(received.size(), static_cast<std::size_t>(kChunks + 2)) << id;
        for (int i = 0; i < kChunks; ++i) {
            ASSERT_EQ(received[i].kind, IncomingKind::stream_chunk) << id << " " << i;
            EXPECT_EQ(received[i].chunk->chunk_id, i);
            EXPECT_EQ(*received[i].chunk->chunk.find("i"), Value(i)) << id;
        }
        EXPECT_EQ(received[kChunks].kind, IncomingKind::stream_done);
        EXPECT_EQ(received[kChunks + 1].kind, IncomingKind::new_request);
    }
    EXPECT_EQ(a.stage->stats().relay_puts, 2 * (kChunks / 2));  // only the tensor chunks
}

TEST_F(StageStreamTest, ClientStreamGetsChunkIndexesPerRequest) {
    TestPlan plan = make_plan(kStreaming);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto to_client = [](const IncomingMessage& message, FakeScheduler& self) {
        if (message.kind != IncomingKind::new_request) return;
        for (int i = 0; i < 4; ++i) {
            self.emit_stream(message.request_id, Map{{"token", i}}, std::nullopt, Map{{"m", i}});
        }
        self.emit_result(message.request_id, *message.payload);
    };
    auto b = start_stage(plan, "b", {.handler = to_client});
    for (const char* id : {"x", "y"}) {
        ASSERT_TRUE(coordinator->submit("b", id, Map{}).has_value());
        auto streams = coordinator->wait_streams(id, 4);
        ASSERT_EQ(streams.size(), 4u);
        for (int i = 0; i < 4; ++i) {
            EXPECT_EQ(streams[i].from_stage, "b");
            EXPECT_EQ(streams[i].chunk_index, i);
            EXPECT_EQ(streams[i].chunk, Value(Map{{"token", i}}));
            EXPECT_EQ(streams[i].metadata, Value(Map{{"m", i}}));
        }
        ASSERT_TRUE(coordinator->wait_complete(id).has_value());
    }
}

TEST_F(StageStreamTest, StreamTargetOutsideStreamToFailsTheRequest) {
    TestPlan plan = make_plan(kStreaming);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto stray = [](const IncomingMessage& message, FakeScheduler& self) {
        self.emit_stream(message.request_id, 1, "zzz");
    };
    auto a = start_stage(plan, "a", {.handler = stray});
    ASSERT_TRUE(coordinator->submit("a", "r", Map{}).has_value());
    auto complete = coordinator->wait_complete("r");
    ASSERT_TRUE(complete.has_value());
    EXPECT_FALSE(complete->ok);
    EXPECT_EQ(complete->error.message, "stage 'a': stream target 'zzz' is not among stream_to (b)");
    EXPECT_TRUE(a.scheduler->was_aborted("r"));
    EXPECT_EQ(a.stage->stats().active_requests, 0);
}

TEST_F(StageStreamTest, ChunksAfterAbortAreReleasedAndTheSendersCreditComesBack) {
    TestPlan plan = make_plan(kStreaming);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto b = start_stage(plan, "b", {.handler = FakeScheduler::hold()});
    ASSERT_TRUE(coordinator->wait_for_subscribers(1));
    // The test plays stage a with a relay of one credit.
    auto sender = relay::create_relay(relay::RelayOptions{
        .name = "tester", .runtime_dir = plan.dir->path(), .slot_bytes = 1 << 20, .credits = 1});
    ASSERT_TRUE(sender.has_value());
    auto send_chunk = [&](const std::string& id, std::int64_t chunk_id) {
        auto write =
            write_stream_chunk(**sender, id, tensor_payload("", 1000).data, Value(), std::nullopt);
        EXPECT_TRUE(write.has_value());
        EXPECT_TRUE(coordinator
                        ->send_to_stage(
                            "b", proto::DataReadyMessage{.request_id = id,
                                                         .from_stage = "a",
                                                         .to_stage = "b",
                                                         .relay_metadata = write->relay_metadata,
                                                         .header = write->header,
                                                         .chunk_id = chunk_id})
                        .has_value());
        return std::move(write->put);
    };
    auto first = send_chunk("dead", 0);
    ASSERT_TRUE(first->wait_for_completion(kHangGuard).has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("dead", 1));
    ASSERT_TRUE(coordinator->abort("dead").has_value());
    ASSERT_TRUE(b.scheduler->wait_aborted("dead"));
    EXPECT_EQ(b.stage->stats().active_requests, 0);
    // A chunk after the abort: b releases it (the one credit returns) and drops it.
    auto late = send_chunk("dead", 1);
    ASSERT_TRUE(late->wait_for_completion(kHangGuard).has_value());
    auto live = send_chunk("live", 0);  // would block for want of a credit otherwise
    ASSERT_TRUE(live->wait_for_completion(kHangGuard).has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("live", 1));
    EXPECT_EQ(b.scheduler->received_for("dead").size(), 1u);
    EXPECT_GE(b.stage->stats().dropped_messages, 1);
    // A control-only done for the aborted request is dropped too.
    ASSERT_TRUE(coordinator
                    ->send_to_stage("b", proto::DataReadyMessage{.request_id = "dead",
                                                                 .from_stage = "a",
                                                                 .to_stage = "b",
                                                                 .is_done = true})
                    .has_value());
    auto more = send_chunk("live", 1);
    ASSERT_TRUE(more->wait_for_completion(kHangGuard).has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("live", 2));
    EXPECT_EQ(b.scheduler->received_for("dead").size(), 1u);
    (*sender)->close();
}

TEST_F(StageStreamTest, StreamErrorDropsTheRequestDownstreamWithoutReportingIt) {
    TestPlan plan = make_plan(kStreaming);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto b = start_stage(plan, "b", {.handler = FakeScheduler::hold()});
    auto header = proto::encode_blob(Value(7), Value());
    ASSERT_TRUE(header.has_value());
    ASSERT_TRUE(coordinator
                    ->send_to_stage("b", proto::DataReadyMessage{.request_id = "r",
                                                                 .from_stage = "a",
                                                                 .to_stage = "b",
                                                                 .header = header->header,
                                                                 .chunk_id = 0})
                    .has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("r", 1));
    EXPECT_EQ(b.stage->stats().active_requests, 1);
    ASSERT_TRUE(coordinator
                    ->send_to_stage("b", proto::DataReadyMessage{.request_id = "r",
                                                                 .from_stage = "a",
                                                                 .to_stage = "b",
                                                                 .error = "upstream broke"})
                    .has_value());
    ASSERT_TRUE(b.scheduler->wait_aborted("r"));
    EXPECT_EQ(b.stage->stats().active_requests, 0);
    // Later messages of the request are dropped; the submit of another request still works.
    ASSERT_TRUE(coordinator->submit("b", "other", Map{}).has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("other", 1));
    EXPECT_EQ(coordinator->completes_for("r"), 0u);
}

TEST_F(StageStreamTest, StreamDoneToFnChoosesTheDoneTargets) {
    TestPlan plan = make_plan(R"(
model_path: /models/test
stages:
  - name: a
    process: pa
    factory: h2test.stage
    next: [b, c]
    stream_to: [b, c]
    stream_done_to_fn: h2test.stream_done
  - name: b
    process: pb
    factory: h2test.stage
    terminal: true
  - name: c
    process: pc
    factory: h2test.stage
    terminal: true
)");
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto a = start_stage(plan, "a");
    auto b = start_stage(plan, "b");
    auto c = start_stage(plan, "c");
    ASSERT_TRUE(
        coordinator->submit("a", "r", Map{}, Map{{"stream_done_to", List{"b"}}}).has_value());
    ASSERT_TRUE(coordinator->wait_complete("r", "b").has_value());
    ASSERT_TRUE(coordinator->wait_complete("r", "c").has_value());
    auto at_b = b.scheduler->received_for("r");
    ASSERT_EQ(at_b.size(), 2u);
    EXPECT_EQ(at_b[0].kind, IncomingKind::stream_done);
    EXPECT_EQ(at_b[1].kind, IncomingKind::new_request);
    auto at_c = c.scheduler->received_for("r");
    ASSERT_EQ(at_c.size(), 1u);
    EXPECT_EQ(at_c[0].kind, IncomingKind::new_request);
    // A stream_done_to_fn answer outside stream_to fails the request at a.
    ASSERT_TRUE(
        coordinator->submit("a", "bad", Map{}, Map{{"stream_done_to", List{"zzz"}}}).has_value());
    auto bad = coordinator->wait_complete("bad");
    ASSERT_TRUE(bad && !bad->ok);
    EXPECT_EQ(bad->from_stage, "a");
    EXPECT_NE(bad->error.message.find("stream_done_to_fn returned 'zzz'"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::pipeline::testing

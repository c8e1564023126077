// Stage IO shell: routing through the relay and local dispatch, fan-out with projections,
// failures reported to the coordinator, hostile data_ready messages, aborts, shutdown, profiler,
// and that nothing (threads, /dev/shm segments) is left behind.
#include "pipeline/stage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include "pipeline/fake_coordinator.h"
#include "pipeline/relay_io.h"
#include "relay/registry.h"

namespace omnirt::pipeline::testing {
namespace {

constexpr const char* kLinear = R"(
model_path: /models/test
stages:
  - name: a
    process: pa
    factory: h2test.stage
    next: b
    relay: {slot_size_mb: 1, credits: 1}
  - name: b
    process: pb
    factory: h2test.stage
    next: c
  - name: c
    process: pc
    factory: h2test.stage
    terminal: true
)";

class StageTest : public ::testing::Test {
  protected:
    void SetUp() override { threads_before_ = thread_count(); }
    void TearDown() override {
        // Every stage and the coordinator are gone: nothing of them may remain.
        EXPECT_TRUE(shm_segments_of_this_process().empty());
        EXPECT_TRUE(thread_count_settles_to(threads_before_)) << thread_names();
    }
    std::size_t threads_before_ = 0;
};

const Tensor* tensor_at(const Value& data, const std::string& key) {
    const Value* value = data.find(key);
    return value == nullptr ? nullptr : value->if_tensor();
}

TEST_F(StageTest, SequentialStagesMoveTensorsThroughTheRelayIntact) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    // a replaces the data with a large tensor (zero-copy view at b) and a small one (copied).
    auto produce = [](const IncomingMessage& message, FakeScheduler& self) {
        StagePayload out = tensor_payload(message.request_id, 300000);
        out.request = message.payload->request;
        out.data["small"] = Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 3.25f});
        self.emit_result(message.request_id, std::move(out));
    };
    // b checks that the large tensor is a zero-copy (read-only) view of a's slot; b and c drop
    // their inputs once handled, which returns the slot to a.
    std::atomic<int> views_at_b{0};
    auto check_view = [&](const IncomingMessage& message, FakeScheduler& self) {
        views_at_b += tensor_at(message.payload->data, "tensor")->read_only() ? 1 : 0;
        self.emit_result(message.request_id, *message.payload);
    };
    auto a = start_stage(plan, "a", {.handler = produce});
    auto b = start_stage(plan, "b", {.handler = check_view, .retain_payloads = false});
    auto c = start_stage(plan, "c", {.retain_payloads = false});
    ASSERT_TRUE(a.stage && b.stage && c.stage);
    for (int i = 0; i < 3; ++i) {  // credits = 1 at a: each send needs the previous read
        std::string id = "r" + std::to_string(i);
        ASSERT_TRUE(coordinator->submit("a", id, Map{{"x", 1}}).has_value());
        auto complete = coordinator->wait_complete(id);
        ASSERT_TRUE(complete.has_value());
        EXPECT_TRUE(complete->ok) << complete->error.to_string();
        EXPECT_EQ(complete->from_stage, "c");
        const Tensor* big = tensor_at(complete->result.data, "tensor");
        ASSERT_NE(big, nullptr);
        EXPECT_TRUE(has_pattern(*big, 300000));
        EXPECT_EQ(*complete->result.data.find("small"),
                  Value(Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 3.25f})));
        EXPECT_EQ(complete->result.request.inputs, Value(Map{{"x", 1}}));
    }
    EXPECT_EQ(views_at_b.load(), 3);
    EXPECT_EQ(a.stage->stats().relay_puts, 3);
    EXPECT_EQ(b.stage->stats().relay_gets, 3);
    EXPECT_EQ(b.stage->stats().relay_puts, 3);
    EXPECT_EQ(c.stage->stats().relay_gets, 3);
    EXPECT_EQ(c.stage->stats().processed, 3);
    EXPECT_EQ(b.stage->stats().local_dispatches, 0);
    // Traffic per edge: a -> b carried the three payloads with their tensor bytes, and the
    // delivery of each was seen (the put waiter records it after the reader took the data).
    auto edges = a.stage->stats().edges;
    ASSERT_EQ(edges.size(), 1u);
    EXPECT_EQ(edges[0].target, "b");
    EXPECT_EQ(edges[0].transfers, 3);
    EXPECT_GE(edges[0].bytes, 3 * 300000);
    EXPECT_GT(edges[0].write_ns, 0);
    EXPECT_TRUE(c.stage->stats().edges.empty());  // terminal: sends nothing to a stage
    EXPECT_TRUE(coordinator->wait_heartbeat("a"));
    EXPECT_TRUE(coordinator->wait_heartbeat("c"));
    for (auto* s : {&a, &b, &c}) {
        s->stage->stop();
        EXPECT_EQ(s->stage->stats().active_requests, 0);
    }
    a.stage->stop();  // idempotent
}

TEST_F(StageTest, LocalDispatchPassesThePayloadByReferenceWithoutTheRelay) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    LocalDispatcher local;
    std::promise<const std::byte*> sent_data;
    auto produce = [&](const IncomingMessage& message, FakeScheduler& self) {
        StagePayload out = tensor_payload(message.request_id, 100000);
        sent_data.set_value(out.data.find("tensor")->as_tensor().data());
        self.emit_result(message.request_id, std::move(out));
    };
    auto a = start_stage(plan, "a", {.handler = produce, .local = &local});
    auto b = start_stage(plan, "b", {.local = &local});
    auto c = start_stage(plan, "c");  // another process: b -> c uses the relay
    ASSERT_TRUE(a.stage && b.stage && c.stage);
    EXPECT_TRUE(local.has("a") && local.has("b"));
    EXPECT_FALSE(local.has("c"));
    ASSERT_TRUE(coordinator->submit("a", "r", Map{}).has_value());
    auto complete = coordinator->wait_complete("r");
    ASSERT_TRUE(complete && complete->ok);
    EXPECT_TRUE(has_pattern(*tensor_at(complete->result.data, "tensor"), 100000));
    // b got a's very tensor, not a copy.
    auto at_b = b.scheduler->received_for("r");
    ASSERT_EQ(at_b.size(), 1u);
    EXPECT_EQ(tensor_at(at_b[0].payload->data, "tensor")->data(), sent_data.get_future().get());
    EXPECT_EQ(a.stage->stats().relay_puts, 0);
    EXPECT_EQ(a.stage->stats().local_dispatches, 1);
    EXPECT_EQ(b.stage->stats().relay_gets, 0);
    EXPECT_EQ(b.stage->stats().relay_puts, 1);
    a.stage->stop();
    EXPECT_FALSE(local.has("a"));
    b.stage->stop();
    c.stage->stop();
}

TEST_F(StageTest, FanOutAppliesPerTargetProjections) {
    TestPlan plan = make_plan(R"(
model_path: /models/test
stages:
  - name: a
    process: pa
    factory: h2test.stage
    next: [b, c]
    project_payload: {b: h2test.project}
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
    ASSERT_TRUE(coordinator->submit("a", "r", Map{{"v", 7}}).has_value());
    auto from_b = coordinator->wait_complete("r", "b");
    auto from_c = coordinator->wait_complete("r", "c");
    ASSERT_TRUE(from_b && from_c);
    EXPECT_EQ(from_b->result.data, Value(Map{{"projected_for", "b"}, {"data", Map{{"v", 7}}}}));
    EXPECT_EQ(from_c->result.data, Value(Map{{"v", 7}}));
    EXPECT_EQ(a.stage->stats().processed, 1);
}

TEST_F(StageTest, SchedulerErrorReachesTheCoordinatorWithTheStageName) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto failing = [](const IncomingMessage& message, FakeScheduler& self) {
        if (message.payload->data.find("fail") != nullptr) {
            self.emit_error(message.request_id, Error{ErrorCode::internal, "model exploded"});
        } else {
            self.emit_result(message.request_id, *message.payload);
        }
    };
    auto a = start_stage(plan, "a");
    auto b = start_stage(plan, "b", {.handler = failing});
    auto c = start_stage(plan, "c");
    ASSERT_TRUE(coordinator->submit("a", "bad", Map{{"fail", true}}).has_value());
    auto complete = coordinator->wait_complete("bad");
    ASSERT_TRUE(complete.has_value());
    EXPECT_FALSE(complete->ok);
    EXPECT_EQ(complete->from_stage, "b");
    EXPECT_EQ(complete->error.code, ErrorCode::internal);
    EXPECT_EQ(complete->error.message, "stage 'b': model exploded");
    // The stage keeps working.
    ASSERT_TRUE(coordinator->submit("a", "good", Map{{"ok", true}}).has_value());
    auto good = coordinator->wait_complete("good");
    ASSERT_TRUE(good && good->ok);
    EXPECT_EQ(b.stage->stats().active_requests, 0);
    EXPECT_EQ(coordinator->completes_for("bad"), 1u);
}

TEST_F(StageTest, ASecondResultForARequestIsDropped) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto twice = [](const IncomingMessage& message, FakeScheduler& self) {
        self.emit_result(message.request_id, *message.payload);
        self.emit_result(message.request_id, *message.payload);
    };
    auto c = start_stage(plan, "c", {.handler = twice});
    ASSERT_TRUE(coordinator->submit("c", "r", Map{}).has_value());
    ASSERT_TRUE(coordinator->submit("c", "next", Map{}).has_value());
    // The output thread handles results in order: once "next" completed, r's second was seen.
    ASSERT_TRUE(coordinator->wait_complete("next").has_value());
    EXPECT_EQ(coordinator->completes_for("r"), 1u);
    EXPECT_EQ(c.stage->stats().processed, 2);
    EXPECT_GE(c.stage->stats().dropped_messages, 1);
}

TEST_F(StageTest, RouteFnOutsideNextFailsTheRequest) {
    TestPlan plan = make_plan(R"(
model_path: /models/test
stages:
  - name: a
    process: pa
    factory: h2test.stage
    next: [b, c]
    route_fn: h2test.route
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
    ASSERT_TRUE(coordinator->submit("a", "stray", Map{}, Map{{"route", List{"b", "zzz"}}}));
    auto stray = coordinator->wait_complete("stray");
    ASSERT_TRUE(stray.has_value());
    EXPECT_FALSE(stray->ok);
    EXPECT_EQ(stray->from_stage, "a");
    EXPECT_NE(stray->error.message.find("route_fn returned 'zzz'"), std::string::npos)
        << stray->error.message;
    ASSERT_TRUE(coordinator->submit("a", "none", Map{}, Map{{"route", List{}}}));
    auto none = coordinator->wait_complete("none");
    ASSERT_TRUE(none.has_value());
    EXPECT_FALSE(none->ok);
    EXPECT_NE(none->error.message.find("no targets"), std::string::npos);
    ASSERT_TRUE(coordinator->submit("a", "routed", Map{}, Map{{"route", List{"c"}}}));
    auto routed = coordinator->wait_complete("routed");
    ASSERT_TRUE(routed && routed->ok);
    EXPECT_EQ(routed->from_stage, "c");
    EXPECT_TRUE(b.scheduler->received().empty());
}

TEST_F(StageTest, MalformedDataReadyFailsThatRequestAndTheStageKeepsWorking) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto b = start_stage(plan, "b");
    auto c = start_stage(plan, "c");
    ASSERT_TRUE(b.stage && c.stage);
    // A relay of the test's own plays a sender with one credit.
    auto sender = relay::create_relay(relay::RelayOptions{
        .name = "tester", .runtime_dir = plan.dir->path(), .slot_bytes = 1 << 16, .credits = 1});
    ASSERT_TRUE(sender.has_value());

    auto expect_failure = [&](const std::string& id, const std::string& needle) {
        auto complete = coordinator->wait_complete(id);
        ASSERT_TRUE(complete.has_value()) << id;
        EXPECT_FALSE(complete->ok) << id;
        EXPECT_EQ(complete->from_stage, "b");
        EXPECT_TRUE(complete->error.message.starts_with("stage 'b': ")) << complete->error.message;
        EXPECT_NE(complete->error.message.find(needle), std::string::npos)
            << id << ": " << complete->error.message;
    };
    auto header_of = [](const StagePayload& payload) {
        auto encoded = proto::encode_payload(payload);
        EXPECT_TRUE(encoded.has_value());
        return encoded->header;
    };

    // 1. Garbage relay metadata.
    StagePayload one = tensor_payload("garbage", 128);
    ASSERT_TRUE(coordinator
                    ->send_to_stage(
                        "b", proto::DataReadyMessage{.request_id = "garbage",
                                                     .from_stage = "a",
                                                     .to_stage = "b",
                                                     .relay_metadata = Map{{"backend", "shm"},
                                                                           {"nbytes", 128},
                                                                           {"kind", "slot"},
                                                                           {"segment", "/nope"}},
                                                     .header = header_of(one)})
                    .has_value());
    expect_failure("garbage", "reading the payload from stage 'a'");

    // 2. Metadata of another backend.
    ASSERT_TRUE(
        coordinator
            ->send_to_stage("b", proto::DataReadyMessage{.request_id = "foreign",
                                                         .from_stage = "a",
                                                         .to_stage = "b",
                                                         .relay_metadata =
                                                             Map{{"backend", "ucx"}, {"nbytes", 1}},
                                                         .header = header_of(one)})
            .has_value());
    expect_failure("foreign", "reading the payload");

    // 3. A real transfer whose header has a bad tensor_info: the request fails, and the
    //    sender's only credit comes back (b read the transfer before judging it).
    StagePayload three = tensor_payload("bad-info", 128);
    proto::PayloadHeader bad = header_of(three);
    bad.tensor_info[0].offset = 4096;
    auto write = write_payload(**sender, three, std::nullopt);
    ASSERT_TRUE(write.has_value());
    ASSERT_TRUE(
        coordinator
            ->send_to_stage("b", proto::DataReadyMessage{.request_id = "bad-info",
                                                         .from_stage = "a",
                                                         .to_stage = "b",
                                                         .relay_metadata = write->relay_metadata,
                                                         .header = bad})
            .has_value());
    expect_failure("bad-info", "reading the payload");
    EXPECT_TRUE(write->put->wait_for_completion(kHangGuard).has_value());

    // 4. Bytes promised by the header but no relay metadata.
    ASSERT_TRUE(coordinator
                    ->send_to_stage("b", proto::DataReadyMessage{.request_id = "no-meta",
                                                                 .from_stage = "a",
                                                                 .to_stage = "b",
                                                                 .header = header_of(one)})
                    .has_value());
    expect_failure("no-meta", "no relay metadata");

    // 5. Neither header nor stream signal; 6. addressed to another stage; 7. a payload of
    //    another request.
    ASSERT_TRUE(coordinator
                    ->send_to_stage("b",
                                    proto::DataReadyMessage{
                                        .request_id = "empty", .from_stage = "a", .to_stage = "b"})
                    .has_value());
    expect_failure("empty", "no header");
    ASSERT_TRUE(coordinator
                    ->send_to_stage("b", proto::DataReadyMessage{.request_id = "misrouted",
                                                                 .from_stage = "a",
                                                                 .to_stage = "c",
                                                                 .header = header_of(one)})
                    .has_value());
    expect_failure("misrouted", "addressed to stage 'c'");
    StagePayload other{.request_id = "someone-else", .data = 1};
    ASSERT_TRUE(coordinator
                    ->send_to_stage("b", proto::DataReadyMessage{.request_id = "mismatch",
                                                                 .from_stage = "a",
                                                                 .to_stage = "b",
                                                                 .header = header_of(other)})
                    .has_value());
    expect_failure("mismatch", "payload of request 'someone-else'");

    // Undecodable bytes never reach the stage (the control plane drops them).
    ASSERT_TRUE(coordinator->send_bytes_to_stage("b", {0xc1, 0x00, 0xff}).has_value());

    // The same sender (one credit) can still send a good payload, and b still works.
    StagePayload good = tensor_payload("good", 128);
    auto good_write = write_payload(**sender, good, std::nullopt);
    ASSERT_TRUE(good_write.has_value());
    ASSERT_TRUE(coordinator
                    ->send_to_stage(
                        "b", proto::DataReadyMessage{.request_id = "good",
                                                     .from_stage = "a",
                                                     .to_stage = "b",
                                                     .relay_metadata = good_write->relay_metadata,
                                                     .header = good_write->header})
                    .has_value());
    auto complete = coordinator->wait_complete("good");
    ASSERT_TRUE(complete && complete->ok);
    EXPECT_TRUE(has_pattern(*tensor_at(complete->result.data, "tensor"), 128));
    EXPECT_TRUE(good_write->put->wait_for_completion(kHangGuard).has_value());
    EXPECT_EQ(b.stage->stats().active_requests, 0);
    EXPECT_EQ(b.scheduler->received().size(), 1u);
    (*sender)->close();
}

TEST_F(StageTest, EventsKeepTheirOrderWhetherTheStageThreadOrTheIoThreadHandlesThem) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto b = start_stage(plan, "b", {.handler = FakeScheduler::hold()});
    ASSERT_TRUE(b.stage);
    auto sender = relay::create_relay(relay::RelayOptions{
        .name = "tester", .runtime_dir = plan.dir->path(), .slot_bytes = 1 << 16, .credits = 16});
    ASSERT_TRUE(sender.has_value());
    // Payloads in the relay need the stage thread (a relay read); submits need no blocking work
    // and are handled on the control plane's IO thread when nothing is queued before them.
    // Alternating the two from one sender must not reorder them.
    constexpr int kRequests = 24;
    std::vector<std::unique_ptr<relay::PutOperation>> puts;
    for (int i = 0; i < kRequests; ++i) {
        const std::string id = "r" + std::to_string(i);
        if (i % 2 == 1) {
            ASSERT_TRUE(coordinator->submit("b", id, Map{{"i", i}}).has_value());
            continue;
        }
        auto write = write_payload(**sender, tensor_payload(id, 1000), std::nullopt);
        ASSERT_TRUE(write.has_value());
        ASSERT_TRUE(coordinator
                        ->send_to_stage(
                            "b", proto::DataReadyMessage{.request_id = id,
                                                         .from_stage = "a",
                                                         .to_stage = "b",
                                                         .relay_metadata = write->relay_metadata,
                                                         .header = write->header})
                        .has_value());
        puts.push_back(std::move(write->put));
    }
    ASSERT_TRUE(b.scheduler->wait_received(kRequests));
    auto received = b.scheduler->received();
    ASSERT_EQ(received.size(), static_cast<std::size_t>(kRequests));
    for (int i = 0; i < kRequests; ++i) {
        EXPECT_EQ(received[i].request_id, "r" + std::to_string(i));
        EXPECT_EQ(received[i].kind, IncomingKind::new_request);
    }
    for (auto& put : puts) EXPECT_TRUE(put->wait_for_completion(kHangGuard).has_value());
    EXPECT_EQ(b.stage->stats().relay_gets, kRequests / 2);
    b.stage->stop();
    (*sender)->close();
}

TEST_F(StageTest, AbortClearsEveryStageAndLateResultsAreDropped) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto a = start_stage(plan, "a");
    auto b = start_stage(plan, "b", {.handler = FakeScheduler::hold()});
    auto c = start_stage(plan, "c");
    ASSERT_TRUE(coordinator->wait_for_subscribers(3));
    ASSERT_TRUE(coordinator->submit("a", "doomed", Map{{"big", tensor_payload("x", 200000).data}})
                    .has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("doomed", 1));
    EXPECT_EQ(b.stage->stats().active_requests, 1);
    ASSERT_TRUE(coordinator->abort("doomed").has_value());
    for (auto* s : {&a, &b, &c}) ASSERT_TRUE(s->scheduler->wait_aborted("doomed"));
    // b's scheduler ignores the abort and emits anyway: the stage drops it. A later request
    // (same outbox, FIFO) shows the drop happened.
    auto held = b.scheduler->received_for("doomed");
    b.scheduler->emit_result("doomed", *held[0].payload);
    ASSERT_TRUE(coordinator->submit("a", "after", Map{}).has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("after", 1));
    b.scheduler->emit_result("after", *b.scheduler->received_for("after")[0].payload);
    auto after = coordinator->wait_complete("after");
    ASSERT_TRUE(after && after->ok);
    EXPECT_EQ(coordinator->completes_for("doomed"), 0u);
    EXPECT_TRUE(c.scheduler->received_for("doomed").empty());
    EXPECT_GE(b.stage->stats().dropped_messages, 1);
    for (auto* s : {&a, &b, &c}) {
        EXPECT_EQ(s->stage->stats().active_requests, 0) << s->stage->name();
        EXPECT_EQ(s->stage->stats().pending_fan_in, 0);
    }
    // A new submit of the id starts the request again.
    ASSERT_TRUE(coordinator->submit("b", "doomed", Map{}).has_value());
    ASSERT_TRUE(b.scheduler->wait_received_for("doomed", 2));
}

TEST_F(StageTest, ShutdownMessageSetsShutdownRequestedAndCallsTheHook) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    std::promise<void> called;
    auto c = start_stage(plan, "c", {.on_shutdown = [&] { called.set_value(); }});
    EXPECT_FALSE(c.stage->shutdown_requested());
    ASSERT_TRUE(
        coordinator->send_to_stage("c", proto::ShutdownMessage{.reason = "test"}).has_value());
    ASSERT_EQ(called.get_future().wait_for(kHangGuard), std::future_status::ready);
    EXPECT_TRUE(c.stage->shutdown_requested());
    // A second one does not call the hook again (the promise would throw).
    ASSERT_TRUE(
        coordinator->send_to_stage("c", proto::ShutdownMessage{.reason = "again"}).has_value());
    c.stage->stop();
}

TEST_F(StageTest, ProfilerRecordsRelaySpans) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    std::promise<void> shutdown;
    auto b = start_stage(plan, "b", {.on_shutdown = [&] { shutdown.set_value(); }});
    auto c = start_stage(plan, "c");
    std::string trace = plan.dir->path() + "/trace-{stage}.json";
    ASSERT_TRUE(
        coordinator->send_to_stage("b", proto::ProfilerStartMessage{.trace_path_template = trace})
            .has_value());
    ASSERT_TRUE(coordinator->submit("b", "r", tensor_payload("r", 1000).data).has_value());
    ASSERT_TRUE(coordinator->wait_complete("r").has_value());
    ASSERT_TRUE(coordinator->send_to_stage("b", proto::ProfilerStopMessage{}).has_value());
    // The stage thread handles messages in order: once shutdown ran, the trace was written.
    ASSERT_TRUE(coordinator->send_to_stage("b", proto::ShutdownMessage{}).has_value());
    ASSERT_EQ(shutdown.get_future().wait_for(kHangGuard), std::future_status::ready);
    std::string path = plan.dir->path() + "/trace-b.json";
    ASSERT_TRUE(std::filesystem::exists(path));
    std::ifstream file(path);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("relay_put"), std::string::npos);
}

TEST_F(StageTest, StopDoesNotHangWhileASenderWaitsForCredits) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto produce = [](const IncomingMessage& message, FakeScheduler& self) {
        self.emit_result(message.request_id, tensor_payload(message.request_id, 300000));
    };
    auto a = start_stage(plan, "a", {.handler = produce});
    // b keeps the zero-copy views of a's only slot: a's next send waits for a credit.
    auto b = start_stage(plan, "b", {.handler = FakeScheduler::hold()});
    for (const char* id : {"r0", "r1", "r2"}) {
        ASSERT_TRUE(coordinator->submit("a", id, Map{}).has_value());
    }
    ASSERT_TRUE(b.scheduler->wait_received_for("r0", 1));
    a.stage->stop();
    b.stage->stop();
    EXPECT_TRUE(b.scheduler->received_for("r1").empty());
}

TEST_F(StageTest, CreateFailsForUnknownStagesAndStartTwice) {
    TestPlan plan = make_plan(kLinear);
    ASSERT_TRUE(plan.plan);
    auto missing = Stage::create({.plan = plan.plan, .stage_name = "zzz"},
                                 std::make_unique<FakeScheduler>(), nullptr);
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    auto no_scheduler = Stage::create({.plan = plan.plan, .stage_name = "a"}, nullptr, nullptr);
    EXPECT_FALSE(no_scheduler.has_value());
    auto no_heartbeat = Stage::create(
        {.plan = plan.plan, .stage_name = "a", .heartbeat_interval = std::chrono::milliseconds(0)},
        std::make_unique<FakeScheduler>(), nullptr);
    EXPECT_FALSE(no_heartbeat.has_value());
    auto a = start_stage(plan, "a");
    ASSERT_TRUE(a.stage);
    EXPECT_FALSE(a.stage->start().has_value());
    a.stage->stop();
    EXPECT_FALSE(a.stage->start().has_value());
}

}  // namespace
}  // namespace omnirt::pipeline::testing

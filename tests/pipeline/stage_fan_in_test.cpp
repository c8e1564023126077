// Fan-in at a Stage: merge of every source through the relay, wait_for_fn (nullopt keeps the
// request pending), bad subsets and sources, and the fan-in timeout (fails the request, frees
// its state, later arrivals released).
#include <gtest/gtest.h>

#include "pipeline/fake_coordinator.h"
#include "pipeline/relay_io.h"
#include "pipeline/stage.h"

namespace omnirt::pipeline::testing {
namespace {

// a fans out to b and c, d waits for both; d's timeout is short only where a test says so.
std::string diamond(const std::string& d_extra = "") {
    return R"(
model_path: /models/test
stages:
  - name: a
    process: pa
    factory: h2test.stage
    next: [b, c]
  - name: b
    process: pb
    factory: h2test.stage
    next: d
  - name: c
    process: pc
    factory: h2test.stage
    next: d
  - name: d
    process: pd
    factory: h2test.stage
    wait_for: [b, c]
    merge_fn: h2test.merge
    terminal: true
)" + d_extra;
}

class StageFanInTest : public ::testing::Test {
  protected:
    void SetUp() override { threads_before_ = thread_count(); }
    void TearDown() override {
        EXPECT_TRUE(shm_segments_of_this_process().empty());
        EXPECT_TRUE(thread_count_settles_to(threads_before_)) << thread_names();
    }

    // Plays stage `from` sending `data` for `request_id` to d (no tensors: no relay data).
    void send_to_d(FakeCoordinator& coordinator, const std::string& request_id,
                   const std::string& from, Value data) {
        StagePayload payload{.request_id = request_id, .data = std::move(data)};
        auto encoded = proto::encode_payload(payload);
        ASSERT_TRUE(encoded.has_value());
        ASSERT_TRUE(coordinator
                        .send_to_stage("d", proto::DataReadyMessage{.request_id = request_id,
                                                                    .from_stage = from,
                                                                    .to_stage = "d",
                                                                    .header = encoded->header})
                        .has_value());
    }
    // Every earlier message of the coordinator's connection to d has been handled once this
    // returns: a submit to a fan-in stage fails at once (the coordinator is no source), and the
    // stage thread handles one connection's messages in order.
    void sync_d(FakeCoordinator& coordinator) {
        std::string id = "sync-" + std::to_string(syncs_++);
        ASSERT_TRUE(coordinator.submit("d", id, Map{}).has_value());
        auto complete = coordinator.wait_complete(id);
        ASSERT_TRUE(complete.has_value());
        EXPECT_FALSE(complete->ok);
        EXPECT_NE(complete->error.message.find("the coordinator"), std::string::npos);
    }

    std::size_t threads_before_ = 0;
    int syncs_ = 0;
};

TEST_F(StageFanInTest, MergesEverySourceThroughTheRelay) {
    TestPlan plan = make_plan(diamond());
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto tag = [](const std::string& name) {
        return [name](const IncomingMessage& message, FakeScheduler& self) {
            StagePayload out = tensor_payload(message.request_id, 100000);
            out.request = message.payload->request;
            out.data["from"] = name;
            self.emit_result(message.request_id, std::move(out));
        };
    };
    auto a = start_stage(plan, "a");
    auto b = start_stage(plan, "b", {.handler = tag("b")});
    auto c = start_stage(plan, "c", {.handler = tag("c")});
    auto d = start_stage(plan, "d");
    ASSERT_TRUE(coordinator->submit("a", "r", Map{}).has_value());
    auto complete = coordinator->wait_complete("r");
    ASSERT_TRUE(complete && complete->ok) << (complete ? complete->error.to_string() : "");
    for (const char* source : {"b", "c"}) {
        const Value* part = complete->result.data.find(source);
        ASSERT_NE(part, nullptr) << source;
        EXPECT_EQ(*part->find("from"), Value(source));
        EXPECT_TRUE(has_pattern(part->find("tensor")->as_tensor(), 100000));
    }
    // d copied its fan-in inputs (views would pin b's and c's slots while it waits).
    auto at_d = d.scheduler->received_for("r");
    ASSERT_EQ(at_d.size(), 1u);
    EXPECT_FALSE(at_d[0].payload->data.find("b")->find("tensor")->as_tensor().read_only());
    EXPECT_EQ(d.stage->stats().relay_gets, 2);
    EXPECT_EQ(d.stage->stats().pending_fan_in, 0);
    EXPECT_EQ(d.stage->stats().active_requests, 0);
}

TEST_F(StageFanInTest, WaitForFnNulloptKeepsTheRequestPendingUntilItChooses) {
    TestPlan plan = make_plan(diamond("    wait_for_fn: h2test.wait_for\n"));
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto d = start_stage(plan, "d");
    // b's payload does not say which sources are active: pending.
    send_to_d(*coordinator, "r", "b", Map{{"x", 1}});
    sync_d(*coordinator);
    EXPECT_EQ(d.stage->stats().pending_fan_in, 1);
    EXPECT_TRUE(d.scheduler->received_for("r").empty());
    // c's says both: complete.
    send_to_d(*coordinator, "r", "c", Map{{"wait_for", List{"b", "c"}}});
    auto complete = coordinator->wait_complete("r");
    ASSERT_TRUE(complete && complete->ok);
    EXPECT_EQ(*complete->result.data.find("b"), Value(Map{{"x", 1}}));
    EXPECT_EQ(d.stage->stats().pending_fan_in, 0);

    // A subset of one source merges at once; the other source arriving later is released.
    send_to_d(*coordinator, "only-b", "b", Map{{"wait_for", List{"b"}}});
    auto only_b = coordinator->wait_complete("only-b");
    ASSERT_TRUE(only_b && only_b->ok);
    EXPECT_EQ(only_b->result.data.find("c"), nullptr);
    send_to_d(*coordinator, "only-b", "c", Map{});
    sync_d(*coordinator);
    EXPECT_EQ(d.stage->stats().pending_fan_in, 0);
    EXPECT_EQ(d.scheduler->received_for("only-b").size(), 1u);
    EXPECT_EQ(coordinator->completes_for("only-b"), 1u);
}

TEST_F(StageFanInTest, BadSubsetsAndUnknownSourcesFailTheRequest) {
    TestPlan plan = make_plan(diamond("    wait_for_fn: h2test.wait_for\n"));
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto d = start_stage(plan, "d");
    send_to_d(*coordinator, "outside", "b", Map{{"wait_for", List{"b", "zzz"}}});
    auto outside = coordinator->wait_complete("outside");
    ASSERT_TRUE(outside && !outside->ok);
    EXPECT_NE(outside->error.message.find("'zzz', which is not among wait_for"), std::string::npos)
        << outside->error.message;
    send_to_d(*coordinator, "empty", "b", Map{{"wait_for", List{}}});
    auto empty = coordinator->wait_complete("empty");
    ASSERT_TRUE(empty && !empty->ok);
    EXPECT_NE(empty->error.message.find("no sources"), std::string::npos);
    send_to_d(*coordinator, "stranger", "a", Map{});
    auto stranger = coordinator->wait_complete("stranger");
    ASSERT_TRUE(stranger && !stranger->ok);
    EXPECT_EQ(stranger->error.message,
              "stage 'd': fan-in got a payload from stage 'a', which is not among its wait_for "
              "sources (b, c)");
    sync_d(*coordinator);
    EXPECT_EQ(d.stage->stats().pending_fan_in, 0);
    EXPECT_EQ(d.stage->stats().active_requests, 0);
}

TEST_F(StageFanInTest, TimeoutFailsTheRequestNamingMissingSourcesAndFreesIt) {
    TestPlan plan = make_plan(diamond("    fan_in_timeout_s: 0.2\n"));
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto d = start_stage(plan, "d");
    send_to_d(*coordinator, "slow", "b", Map{});
    auto complete = coordinator->wait_complete("slow");
    ASSERT_TRUE(complete.has_value());
    EXPECT_FALSE(complete->ok);
    EXPECT_EQ(complete->error.code, ErrorCode::deadline_exceeded);
    EXPECT_EQ(complete->error.message, "stage 'd': fan-in timed out after 0.2 s waiting for c");
    // The late source is released: no new pending state, nothing for the scheduler.
    send_to_d(*coordinator, "slow", "c", Map{});
    sync_d(*coordinator);
    EXPECT_EQ(d.stage->stats().pending_fan_in, 0);
    EXPECT_EQ(d.stage->stats().active_requests, 0);
    EXPECT_TRUE(d.scheduler->received_for("slow").empty());
    EXPECT_EQ(coordinator->completes_for("slow"), 1u);
}

TEST_F(StageFanInTest, AbortDropsPendingFanIn) {
    TestPlan plan = make_plan(diamond());
    ASSERT_TRUE(plan.plan);
    auto coordinator = FakeCoordinator::create(*plan.plan);
    auto d = start_stage(plan, "d");
    ASSERT_TRUE(coordinator->wait_for_subscribers(1));
    send_to_d(*coordinator, "r", "b", Map{});
    sync_d(*coordinator);
    EXPECT_EQ(d.stage->stats().pending_fan_in, 1);
    ASSERT_TRUE(coordinator->abort("r").has_value());
    ASSERT_TRUE(d.scheduler->wait_aborted("r"));
    EXPECT_EQ(d.stage->stats().pending_fan_in, 0);
    send_to_d(*coordinator, "r", "c", Map{});
    sync_d(*coordinator);
    EXPECT_EQ(d.stage->stats().pending_fan_in, 0);
    EXPECT_EQ(coordinator->completes_for("r"), 0u);
}

}  // namespace
}  // namespace omnirt::pipeline::testing

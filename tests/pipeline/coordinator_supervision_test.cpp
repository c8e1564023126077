// Supervision's side of the coordinator: a stage marked down fails only the requests that may
// pass through it, refuses new ones while it restarts, comes back with the first heartbeat of its
// new process (never with one of the dead process), and the ids it failed cannot be reused.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "pipeline/coordinator.h"
#include "pipeline/fake_stage.h"

namespace omnirt::pipeline::testing {
namespace {

class CoordinatorSupervisionTest : public CoordinatorTest {
  protected:
    // src routes to `left` or `right` (both terminal); the request's terminal stages choose.
    CoordinatorOptions branches() const {
        auto o = options({"src", "left", "right"}, {"left", "right"});
        o.stage_targets = {{"src", {"left", "right"}}, {"left", {}}, {"right", {}}};
        return o;
    }
    static Status heartbeat_from(FakeStage& stage, const std::string& name, std::int64_t pid) {
        return stage.send(proto::HeartbeatMessage{.stage = name, .pid = pid});
    }
};

// Polls `condition` until it holds; `timeout` is a hang guard only.
bool eventually_true(const std::function<bool()>& condition, Duration timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

TEST_F(CoordinatorSupervisionTest, ADeadStageFailsOnlyTheRequestsThatMayPassThroughIt) {
    auto o = branches();
    o.terminal_stages = {"left"};  // every request ends in left: right is on no path
    auto& coordinator = start(o);
    auto& src = add_stage("src");
    add_stage("left");
    add_stage("right");
    wait_for_stages();
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r1", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(src.wait_for_messages(1));

    coordinator.mark_stages_down({"right"}, "process 'b' killed by signal 9",
                                 StageState::restarting);
    EXPECT_EQ(log.terminal_count(), 0u);
    EXPECT_EQ(coordinator.live_requests(), 1u);
    // Still admitted: nothing of theirs passes through right.
    ASSERT_TRUE(coordinator.start_request("r2", make_request(2), {}, log.callback()).has_value());
    auto health = coordinator.health();
    EXPECT_FALSE(health.healthy);
    EXPECT_TRUE(health.live);  // being healed
    EXPECT_EQ(health.stages[1].stage, "right");
    EXPECT_EQ(health.stages[1].state, StageState::restarting);
    EXPECT_EQ(health.stages[1].restarts, 1);
    EXPECT_NE(health.reason.find("stage 'right' is restarting: process 'b' killed by signal 9"),
              std::string::npos)
        << health.reason;

    coordinator.mark_stages_down({"left"}, "process 'a' exited with code 1",
                                 StageState::restarting);
    ASSERT_EQ(log.terminal_count(), 2u);
    for (const auto& event : log.events()) {
        EXPECT_EQ(event.error.code, ErrorCode::unavailable);
        EXPECT_EQ(event.error.message, "stage 'left' is down: process 'a' exited with code 1");
    }
    auto refused = coordinator.start_request("r3", make_request(3), {}, log.callback());
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find("stage 'left' is restarting"), std::string::npos)
        << refused.error().message;
}

TEST_F(CoordinatorSupervisionTest, AStageComesBackWithTheFirstHeartbeatOfItsNewProcess) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    wait_for_stages();
    ASSERT_TRUE(a.heartbeat().has_value());
    ASSERT_TRUE(b.heartbeat().has_value());
    ASSERT_TRUE(coordinator.wait_for_heartbeats(kHangGuard).has_value());
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r1", make_request(1), {}, log.callback()).has_value());

    coordinator.mark_stages_down({"b"}, "process 'b' killed by signal 9", StageState::restarting);
    ASSERT_EQ(log.terminal_count(), 1u);
    // Messages about r1 from the dead incarnation are dropped, and its id is not reused.
    ASSERT_TRUE(b.complete("r1", StagePayload{.data = "stale"}).has_value());
    auto reused = coordinator.start_request("r1", make_request(1), {}, log.callback());
    ASSERT_FALSE(reused.has_value());
    EXPECT_EQ(reused.error().code, ErrorCode::already_exists);

    // A heartbeat of the dead process (any pid before the restart) revives nothing.
    ASSERT_TRUE(heartbeat_from(b, "b", 4242).has_value());
    coordinator.mark_stages_restarted({"b"}, 5151);
    ASSERT_TRUE(heartbeat_from(b, "b", 4242).has_value());
    // Processed in order with the heartbeats: b's completion of a request that is not live.
    ASSERT_TRUE(b.complete("nobody", StagePayload{}).has_value());
    ASSERT_TRUE(
        eventually_true([&] { return coordinator.health().ignored_messages >= 4; }, kHangGuard));
    auto health = coordinator.health();
    EXPECT_EQ(health.stages[1].state, StageState::restarting);
    EXPECT_FALSE(health.healthy);

    // The right pid, but the new process has not subscribed to the abort broadcast yet (the
    // fake of the dead one is still the only subscriber for b): not running yet.
    ASSERT_TRUE(heartbeat_from(b, "b", 5151).has_value());
    ASSERT_TRUE(b.complete("nobody", StagePayload{}).has_value());
    ASSERT_TRUE(
        eventually_true([&] { return coordinator.health().ignored_messages >= 5; }, kHangGuard));
    EXPECT_EQ(coordinator.health().stages[1].state, StageState::restarting);

    // The new incarnation: it binds b's endpoint and subscribes; its heartbeats bring b back.
    b.stop();
    auto& reborn = add_stage("b");
    ASSERT_TRUE(eventually_true(
        [&] {
            if (!heartbeat_from(reborn, "b", 5151).has_value()) return false;
            return coordinator.health().stages[1].state == StageState::running;
        },
        kHangGuard));
    health = coordinator.health();
    EXPECT_TRUE(health.stages[1].alive);
    EXPECT_EQ(health.stages[1].pid, 5151);
    EXPECT_EQ(health.stages[1].restarts, 1);
    EXPECT_TRUE(health.stages[1].down_reason.empty());
    EXPECT_TRUE(health.healthy) << health.reason;
    EXPECT_TRUE(health.reason.empty());
    auto served = coordinator.start_request("r2", make_request(2), {}, log.callback());
    ASSERT_TRUE(served.has_value()) << served.error().to_string();
    ASSERT_TRUE(reborn.complete("r2", StagePayload{.data = "fresh"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(2));
    auto events = log.events_for("r2");
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, RequestEvent::Kind::completed);
    EXPECT_EQ(events[0].result.data, Value("fresh"));
}

TEST_F(CoordinatorSupervisionTest, AFailedStageStaysFailed) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& a = add_stage("a");
    wait_for_stages();
    coordinator.mark_stages_down({"a"}, "restarted 2 times within 60 s; last: exited with code 78",
                                 StageState::failed);
    coordinator.mark_stages_restarted({"a"}, 77);  // only a restarting stage takes a new pid
    ASSERT_TRUE(heartbeat_from(a, "a", 77).has_value());
    ASSERT_TRUE(a.complete("nobody", StagePayload{}).has_value());
    ASSERT_TRUE(
        eventually_true([&] { return coordinator.health().ignored_messages >= 2; }, kHangGuard));
    auto health = coordinator.health();
    EXPECT_FALSE(health.live);  // beyond repair
    EXPECT_EQ(health.stages[0].state, StageState::failed);
    EXPECT_EQ(health.reason,
              "stage 'a' failed: restarted 2 times within 60 s; last: exited with code 78");
    EventLog log;
    auto refused = coordinator.start_request("r", make_request(1), {}, log.callback());
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().message,
              "pipeline unavailable: stage 'a' failed: restarted 2 times within 60 s; last: "
              "exited with code 78");
}

}  // namespace
}  // namespace omnirt::pipeline::testing

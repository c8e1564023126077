// Coordinator failure paths: stage errors, aborts, deadlines, stages marked down, heartbeats and
// health, and exactly-once endings when a completion races an abort.
#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

#include "pipeline/coordinator.h"
#include "pipeline/fake_stage.h"

namespace omnirt::pipeline::testing {
namespace {

using CoordinatorFailureTest = CoordinatorTest;

TEST_F(CoordinatorFailureTest, StageErrorFailsTheRequestAndAbortsItEverywhere) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    wait_for_stages();
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(a.wait_for_messages(1));
    ASSERT_TRUE(a.chunk("r", 0, "before the error").has_value());
    ASSERT_TRUE(
        a.complete_with_error("r", Error{ErrorCode::invalid_argument, "bad image"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    auto events = log.events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].kind, RequestEvent::Kind::chunk);
    EXPECT_EQ(events[1].kind, RequestEvent::Kind::failed);
    EXPECT_EQ(events[1].error.code, ErrorCode::invalid_argument);
    EXPECT_EQ(events[1].error.message, "stage 'a': bad image");
    ASSERT_TRUE(b.wait_for_aborts(1));
    EXPECT_EQ(b.aborts()[0].request_id, "r");
    EXPECT_NE(b.aborts()[0].reason.find("bad image"), std::string::npos);
    EXPECT_EQ(coordinator.health().requests_by_state["failed"], 1);
    EXPECT_EQ(coordinator.live_requests(), 0u);

    // A message the stage already prefixed is not prefixed twice; a late result is ignored.
    ASSERT_TRUE(coordinator.start_request("s", make_request(2), {}, log.callback()).has_value());
    ASSERT_TRUE(b.complete_with_error("s", Error{ErrorCode::internal, "stage 'b': out of memory"})
                    .has_value());
    ASSERT_TRUE(b.complete("s", StagePayload{}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(2));
    events = log.events_for("s");
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].error.message, "stage 'b': out of memory");
    EXPECT_EQ(events[0].error.code, ErrorCode::internal);
}

TEST_F(CoordinatorFailureTest, ErrorAfterOneOfTwoTerminalResultsFails) {
    auto& coordinator = start(options({"a", "b", "c"}, {"b", "c"}));
    add_stage("a");
    auto& b = add_stage("b");
    auto& c = add_stage("c");
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(b.complete("r", StagePayload{.data = "half"}).has_value());
    ASSERT_TRUE(c.complete_with_error("r", Error{ErrorCode::data_loss, "codec"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    auto events = log.events();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, RequestEvent::Kind::failed);
    EXPECT_EQ(events[0].error.code, ErrorCode::data_loss);
    EXPECT_EQ(events[0].error.message, "stage 'c': codec");
}

TEST_F(CoordinatorFailureTest, AbortEndsTheRequestAndBroadcasts) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    wait_for_stages();
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(coordinator.abort("r", "client went away").has_value());
    // Within the call.
    ASSERT_EQ(log.terminal_count(), 1u);
    auto events = log.events();
    EXPECT_EQ(events[0].kind, RequestEvent::Kind::aborted);
    EXPECT_EQ(events[0].error.code, ErrorCode::aborted);
    EXPECT_EQ(events[0].error.message, "client went away");
    for (FakeStage* stage : {&a, &b}) {
        ASSERT_TRUE(stage->wait_for_aborts(1));
        EXPECT_EQ(stage->aborts()[0], (proto::AbortMessage{"r", "client went away"}));
    }
    auto again = coordinator.abort("r", "twice");
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code, ErrorCode::not_found);
    auto unknown = coordinator.abort("never", "x");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
    EXPECT_EQ(coordinator.health().requests_by_state["aborted"], 1);
    EXPECT_EQ(log.terminal_count(), 1u);
}

TEST_F(CoordinatorFailureTest, DeadlineFailsTheRequestAndBroadcasts) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& a = add_stage("a");
    wait_for_stages();
    EventLog log;
    auto now = std::chrono::system_clock::now();
    // Started out of deadline order; one without a deadline stays live. The deadlines are a
    // second apart, so a stalled test thread cannot pass one before its request is started.
    ASSERT_TRUE(
        coordinator.start_request("late", make_request(1), {.deadline = now + 3s}, log.callback())
            .has_value());
    ASSERT_TRUE(
        coordinator.start_request("early", make_request(2), {.deadline = now + 1s}, log.callback())
            .has_value());
    ASSERT_TRUE(
        coordinator.start_request("middle", make_request(3), {.deadline = now + 2s}, log.callback())
            .has_value());
    ASSERT_TRUE(
        coordinator.start_request("forever", make_request(4), {}, log.callback()).has_value());
    ASSERT_TRUE(log.wait_for_terminals(3));
    auto events = log.events();
    ASSERT_EQ(events.size(), 3u);
    std::vector<std::string> order;
    for (const auto& event : events) {
        EXPECT_EQ(event.kind, RequestEvent::Kind::failed);
        EXPECT_EQ(event.error.code, ErrorCode::deadline_exceeded);
        EXPECT_NE(event.error.message.find(event.request_id), std::string::npos);
        order.push_back(event.request_id);
    }
    EXPECT_EQ(order, (std::vector<std::string>{"early", "middle", "late"}));
    ASSERT_TRUE(a.wait_for_aborts(3));
    EXPECT_EQ(coordinator.live_requests(), 1u);
    // A result after the deadline is ignored.
    ASSERT_TRUE(a.complete("early", StagePayload{}).has_value());
    ASSERT_TRUE(a.complete("forever", StagePayload{.data = "ok"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(4));
    EXPECT_EQ(log.events().back().kind, RequestEvent::Kind::completed);
    EXPECT_EQ(coordinator.health().ignored_messages, 1u);
}

TEST_F(CoordinatorFailureTest, PassedDeadlineFailsAtOnceAndSendsNothing) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& a = add_stage("a", echo_responder());
    EventLog log;
    auto passed = coordinator.start_request(
        "r", make_request(1), {.deadline = std::chrono::system_clock::now() - 1ms}, log.callback());
    ASSERT_FALSE(passed.has_value());
    EXPECT_EQ(passed.error().code, ErrorCode::deadline_exceeded);
    auto submitted = coordinator.submit("r", make_request(1),
                                        {.deadline = std::chrono::system_clock::now() - 1s});
    ASSERT_FALSE(submitted.has_value());
    EXPECT_EQ(submitted.error().code, ErrorCode::deadline_exceeded);
    // The next request is the only one the stage ever saw.
    ASSERT_TRUE(coordinator.submit("next", make_request(2)).has_value());
    auto submits = a.submits();
    ASSERT_EQ(submits.size(), 1u);
    EXPECT_EQ(submits[0].request_id, "next");
    EXPECT_EQ(log.terminal_count(), 0u);
}

TEST_F(CoordinatorFailureTest, MarkStagesDownFailsLiveRequestsAndRejectsNewOnes) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    add_stage("b");
    wait_for_stages();
    EventLog log;
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(
            coordinator.start_request("r" + std::to_string(i), make_request(i), {}, log.callback())
                .has_value());
    }
    auto stream = coordinator.stream("s", make_request(9));
    ASSERT_TRUE(stream.has_value());
    coordinator.mark_stages_down({"b"}, "process exited with signal 9");
    // Within the call, one event each.
    ASSERT_EQ(log.terminal_count(), 5u);
    for (const auto& event : log.events()) {
        EXPECT_EQ(event.kind, RequestEvent::Kind::failed);
        EXPECT_EQ(event.error.code, ErrorCode::unavailable);
        EXPECT_EQ(event.error.message, "stage 'b' is down: process exited with signal 9");
    }
    auto streamed = (*stream)->next(Duration(0));
    ASSERT_TRUE(streamed.has_value() && streamed->has_value());
    EXPECT_EQ((*streamed)->error.code, ErrorCode::unavailable);
    EXPECT_EQ(coordinator.live_requests(), 0u);
    ASSERT_TRUE(a.wait_for_aborts(6));  // the surviving stage drops them too

    auto health = coordinator.health();
    EXPECT_FALSE(health.healthy);
    ASSERT_EQ(health.stages.size(), 2u);
    EXPECT_EQ(health.stages[1].stage, "b");
    EXPECT_FALSE(health.stages[1].alive);
    EXPECT_EQ(health.stages[1].down_reason, "process exited with signal 9");
    EXPECT_EQ(health.requests_by_state["failed"], 6);

    auto refused = coordinator.start_request("new", make_request(1), {}, log.callback());
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find("stage 'b' failed: process exited with signal 9"),
              std::string::npos)
        << refused.error().message;
    EXPECT_EQ(health.stages[1].state, StageState::failed);
    EXPECT_EQ(health.stages[1].restarts, 0);
    EXPECT_NE(health.reason.find("stage 'b' failed"), std::string::npos) << health.reason;
    // A heartbeat from the dead stage's successor does not revive the pipeline (fail fast).
    ASSERT_TRUE(stages_.at("b")->heartbeat().has_value());
    EXPECT_FALSE(coordinator.health().healthy);

    coordinator.mark_stages_down({"a", "b"}, "host lost");
    EXPECT_EQ(coordinator.health().stages[0].down_reason, "host lost");
}

TEST_F(CoordinatorFailureTest, HealthFollowsHeartbeats) {
    auto o = options({"a", "b"}, {"b"});
    o.heartbeat_timeout = 30s;
    auto& coordinator = start(o);
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    auto health = coordinator.health();
    EXPECT_FALSE(health.healthy);  // no heartbeat yet
    ASSERT_EQ(health.stages.size(), 2u);
    EXPECT_FALSE(health.stages[0].alive);
    EXPECT_FALSE(health.stages[1].alive);

    // A heartbeat is processed before a later message from the same stage: b's completion.
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r1", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(b.heartbeat(3, 2, 40).has_value());
    ASSERT_TRUE(b.complete("r1", StagePayload{}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    health = coordinator.health();
    EXPECT_FALSE(health.healthy);  // a is still silent
    EXPECT_FALSE(health.stages[0].alive);
    EXPECT_TRUE(health.stages[1].alive);
    EXPECT_EQ(health.stages[1].pid, static_cast<std::int64_t>(::getpid()));
    EXPECT_EQ(health.stages[1].queue_depth, 3);
    EXPECT_EQ(health.stages[1].active_requests, 2);
    EXPECT_EQ(health.stages[1].processed, 40);

    ASSERT_TRUE(coordinator.start_request("r2", make_request(2), {}, log.callback()).has_value());
    ASSERT_TRUE(a.heartbeat().has_value());
    ASSERT_TRUE(a.complete_with_error("r2", Error{ErrorCode::internal, "x"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(2));
    ASSERT_TRUE(coordinator.start_request("r3", make_request(3), {}, log.callback()).has_value());
    health = coordinator.health();
    EXPECT_TRUE(health.healthy);
    EXPECT_TRUE(health.stages[0].alive);
    EXPECT_EQ(health.requests_by_state["completed"], 1);
    EXPECT_EQ(health.requests_by_state["failed"], 1);
    EXPECT_EQ(health.requests_by_state["pending"] + health.requests_by_state["running"], 1);

    coordinator.stop();
    EXPECT_FALSE(coordinator.health().healthy);
}

TEST_F(CoordinatorFailureTest, StaleHeartbeatsMakeThePipelineUnhealthy) {
    auto o = options({"a"}, {"a"});
    o.heartbeat_timeout = 1ms;
    auto& coordinator = start(o);
    auto& a = add_stage("a");
    EventLog log;
    // Admitted: a stage that never sent a heartbeat may still be starting.
    ASSERT_TRUE(coordinator.start_request("r", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(a.heartbeat().has_value());
    ASSERT_TRUE(a.complete("r", StagePayload{}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    // Not synchronisation: the heartbeat must age past the 1 ms timeout.
    std::this_thread::sleep_for(20ms);
    auto health = coordinator.health();
    EXPECT_FALSE(health.healthy);
    EXPECT_FALSE(health.stages[0].alive);
    auto refused = coordinator.start_request("s", make_request(1), {}, log.callback());
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find("heartbeat"), std::string::npos);
}

TEST_F(CoordinatorFailureTest, CompletionRacingAbortEndsEachRequestOnce) {
    constexpr int kRequests = 300;
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& a = add_stage("a", echo_responder());
    EventLog log;
    for (int i = 0; i < kRequests; ++i) {
        std::string id = "r" + std::to_string(i);
        ASSERT_TRUE(coordinator.start_request(id, make_request(i), {}, log.callback()).has_value());
        // The echo reply and the abort race; either may win, never both.
        (void)coordinator.abort(id, "race");
    }
    ASSERT_TRUE(log.wait_for_terminals(kRequests));
    std::map<std::string, int> terminals;
    for (const auto& event : log.events()) {
        if (event.terminal()) terminals[event.request_id]++;
    }
    ASSERT_EQ(terminals.size(), static_cast<std::size_t>(kRequests));
    for (const auto& [id, count] : terminals) EXPECT_EQ(count, 1) << id;
    auto health = coordinator.health();
    EXPECT_EQ(health.requests_by_state["completed"] + health.requests_by_state["aborted"],
              kRequests);
    EXPECT_EQ(coordinator.live_requests(), 0u);
    ASSERT_TRUE(a.wait_for_messages(kRequests));
}

TEST_F(CoordinatorFailureTest, WaitForStagesTimesOut) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto waited = coordinator.wait_for_stages(1, Duration(1));
    ASSERT_FALSE(waited.has_value());
    EXPECT_EQ(waited.error().code, ErrorCode::deadline_exceeded);
    auto& a = add_stage("a");
    (void)a;
    wait_for_stages();
}

TEST_F(CoordinatorFailureTest, StartFailsOnABadEndpoint) {
    auto o = options({"a"}, {"a"});
    o.coordinator_endpoint = "bogus://nowhere";
    auto coordinator = Coordinator::create(o);
    ASSERT_TRUE(coordinator.has_value());
    auto started = (*coordinator)->start();
    ASSERT_FALSE(started.has_value());
    EXPECT_EQ(started.error().code, ErrorCode::unavailable);
    EXPECT_NE(started.error().message.find("bogus://nowhere"), std::string::npos);
    EventLog log;
    auto refused = (*coordinator)->start_request("r", make_request(1), {}, log.callback());
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
}

TEST_F(CoordinatorFailureTest, StopWithoutStartAndUnknownStagesDown) {
    auto created = Coordinator::create(options({"a"}, {"a"}));
    ASSERT_TRUE(created.has_value());
    (*created)->mark_stages_down({"nobody"}, "never existed");
    EXPECT_FALSE((*created)->health().healthy);
    (*created)->stop();
    (*created)->stop();
    auto start_after_stop = (*created)->start();
    ASSERT_FALSE(start_after_stop.has_value());
    EXPECT_EQ(start_after_stop.error().code, ErrorCode::failed_precondition);
}

TEST_F(CoordinatorFailureTest, ACallbackThatThrowsDoesNotStopTheCoordinator) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& a = add_stage("a");
    EventLog log;
    auto inner = log.callback();
    auto throwing = [inner](RequestEvent event) {
        bool chunk = !event.terminal();
        inner(std::move(event));
        if (chunk) throw std::runtime_error("client bug");
    };
    ASSERT_TRUE(coordinator.start_request("r", make_request(1), {}, throwing).has_value());
    ASSERT_TRUE(a.chunk("r", 0, "x").has_value());
    ASSERT_TRUE(a.complete("r", StagePayload{.data = "done"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    auto events = log.events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].kind, RequestEvent::Kind::completed);
    EXPECT_EQ(events[1].result.data, Value("done"));
}

}  // namespace
}  // namespace omnirt::pipeline::testing

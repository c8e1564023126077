// Coordinator basics over ipc with fake stages: validation, submit round trips, terminal stage
// selection and merging, admission errors, ignored and malformed messages, profiler control,
// stop, and many concurrent requests.
#include "pipeline/coordinator.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "core/registry.h"
#include "pipeline/fake_stage.h"

namespace omnirt::pipeline::testing {
namespace {

TEST_F(CoordinatorTest, CreateRejectsIncompleteOptions) {
    auto valid = options({"a", "b"}, {"b"});
    auto expect_invalid = [](CoordinatorOptions o, const std::string& mention) {
        auto created = Coordinator::create(std::move(o));
        ASSERT_FALSE(created.has_value());
        EXPECT_EQ(created.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(created.error().message.find(mention), std::string::npos)
            << created.error().message;
    };
    auto o = valid;
    o.coordinator_endpoint.clear();
    expect_invalid(o, "coordinator_endpoint");
    o = valid;
    o.abort_endpoint.clear();
    expect_invalid(o, "abort_endpoint");
    o = valid;
    o.entry_stage = "x";
    expect_invalid(o, "entry stage 'x'");
    o = valid;
    o.terminal_stages = {"b", "y"};
    expect_invalid(o, "terminal stage 'y'");
    o = valid;
    o.terminal_stages.clear();
    expect_invalid(o, "no terminal stages");
    o = valid;
    o.stage_endpoints.clear();
    expect_invalid(o, "stage_endpoints");
    o = valid;
    o.max_live_requests = 0;
    expect_invalid(o, "max_live_requests");

    o = valid;
    o.terminal_stages_fn = "test.coordinator.no_such_function";
    auto created = Coordinator::create(o);
    ASSERT_FALSE(created.has_value());
    EXPECT_EQ(created.error().code, ErrorCode::not_found);
    EXPECT_NE(created.error().message.find("test.coordinator.no_such_function"), std::string::npos)
        << created.error().message;
}

TEST_F(CoordinatorTest, SubmitRoundTripThroughAnEchoStage) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& stage = add_stage("a", echo_responder());
    wait_for_stages();
    OmniRequest request{.inputs = Map{{"prompt", "hello"}}, .params = Map{{"max_tokens", 3}}};
    auto result = coordinator.submit("r1", request);
    ASSERT_TRUE(result.has_value()) << result.error().to_string();
    EXPECT_EQ(result->request_id, "r1");
    EXPECT_EQ(result->request, request);
    EXPECT_EQ(result->data, request.inputs);

    auto submits = stage.submits();
    ASSERT_EQ(submits.size(), 1u);
    EXPECT_EQ(submits[0].request_id, "r1");
    EXPECT_EQ(submits[0].payload.request_id, "r1");
    EXPECT_EQ(submits[0].payload.data, request.inputs);
    EXPECT_EQ(submits[0].payload.request, request);
    EXPECT_FALSE(submits[0].deadline_unix_ms.has_value());

    EXPECT_EQ(coordinator.live_requests(), 0u);
    auto health = coordinator.health();
    EXPECT_EQ(health.requests_by_state["completed"], 1);
    EXPECT_EQ(health.requests_by_state["running"], 0);
    EXPECT_EQ(health.requests_by_state["pending"], 0);
    // The id is free again once the request ended.
    EXPECT_TRUE(coordinator.submit("r1", request).has_value());
}

TEST_F(CoordinatorTest, SubmitCarriesTheDeadline) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& stage = add_stage("a", echo_responder());
    auto deadline = std::chrono::system_clock::now() + 1h;
    ASSERT_TRUE(coordinator.submit("r", make_request(1), {.deadline = deadline}).has_value());
    auto submits = stage.submits();
    ASSERT_EQ(submits.size(), 1u);
    ASSERT_TRUE(submits[0].deadline_unix_ms.has_value());
    EXPECT_EQ(
        *submits[0].deadline_unix_ms,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_since_epoch()).count());
}

TEST_F(CoordinatorTest, TwoTerminalStagesAreMerged) {
    auto& coordinator = start(options({"a", "decode", "vocoder"}, {"decode", "vocoder"}));
    auto& entry = add_stage("a");
    auto& decode = add_stage("decode");
    auto& vocoder = add_stage("vocoder");
    EventLog log;
    OmniRequest request{.inputs = "in", .metadata = Map{{"user", "u1"}}};
    ASSERT_TRUE(coordinator.start_request("r", request, {}, log.callback()).has_value());
    ASSERT_TRUE(entry.wait_for_messages(1));
    ASSERT_TRUE(decode.complete("r", StagePayload{.request_id = "r", .data = "text"}).has_value());
    // A second result from the same terminal is ignored; the request waits for the vocoder.
    ASSERT_TRUE(decode.complete("r", StagePayload{.request_id = "r", .data = "again"}).has_value());
    // Stages reach the coordinator over separate connections: a chunk from decode, seen by the
    // client, shows that decode's messages before it were processed.
    ASSERT_TRUE(decode.chunk("r", 0, "sync").has_value());
    ASSERT_TRUE(log.wait_for_events(1));
    ASSERT_TRUE(vocoder.complete("r", StagePayload{.request_id = "r", .data = Bytes{{1, 2, 3}}})
                    .has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    auto events = log.events_for("r");
    ASSERT_EQ(events.size(), 2u);
    events.erase(events.begin());  // the sync chunk
    EXPECT_EQ(events[0].kind, RequestEvent::Kind::completed);
    EXPECT_EQ(events[0].result.request_id, "r");
    EXPECT_EQ(events[0].result.request, request);
    EXPECT_EQ(events[0].result.data, Value(Map{{"decode", "text"}, {"vocoder", Bytes{{1, 2, 3}}}}));
    EXPECT_EQ(coordinator.health().ignored_messages, 1u);
}

TEST_F(CoordinatorTest, CompletionFromANonTerminalStageIsIgnored) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(a.wait_for_messages(1));
    ASSERT_TRUE(a.complete("r", StagePayload{.request_id = "r", .data = "wrong"}).has_value());
    ASSERT_TRUE(a.chunk("r", 0, "sync").has_value());  // a's completion was processed before it
    ASSERT_TRUE(log.wait_for_events(1));
    ASSERT_TRUE(b.complete("r", StagePayload{.request_id = "r", .data = "right"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    auto events = log.events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].result.data, Value("right"));
    EXPECT_EQ(coordinator.health().ignored_messages, 1u);
}

// Terminal stages chosen per request: "only_vocoder" in params picks one, otherwise the static
// list applies; a function may also fail or name an unknown stage.
Status register_terminal_functions() {
    static Status registered = [] {
        TerminalStagesFn pick =
            [](const OmniRequest& request) -> Result<std::optional<std::vector<std::string>>> {
            if (request.params.find("fail") != nullptr) {
                return fail(ErrorCode::invalid_argument, "cannot choose");
            }
            if (request.params.find("unknown") != nullptr) {
                return std::optional<std::vector<std::string>>({"nowhere"});
            }
            if (request.params.find("only_vocoder") != nullptr) {
                return std::optional<std::vector<std::string>>({"vocoder"});
            }
            return std::optional<std::vector<std::string>>();
        };
        return Registry::global().add(FunctionKind::terminal_stages, "test.coordinator.pick",
                                      RegistryEntry{.callable = pick});
    }();
    return registered;
}

TEST_F(CoordinatorTest, TerminalStagesFunctionPicksPerRequest) {
    ASSERT_TRUE(register_terminal_functions().has_value());
    auto o = options({"a", "decode", "vocoder"}, {"decode", "vocoder"});
    o.terminal_stages_fn = "test.coordinator.pick";
    auto& coordinator = start(o);
    add_stage("a");
    auto& decode = add_stage("decode");
    auto& vocoder = add_stage("vocoder");
    EventLog log;

    OmniRequest one{.inputs = 1, .params = Map{{"only_vocoder", true}}};
    ASSERT_TRUE(coordinator.start_request("one", one, {}, log.callback()).has_value());
    ASSERT_TRUE(
        vocoder.complete("one", StagePayload{.request_id = "one", .data = "audio"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    auto events = log.events_for("one");
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, RequestEvent::Kind::completed);
    EXPECT_EQ(events[0].result.data, Value("audio"));  // not merged: one terminal

    ASSERT_TRUE(coordinator.start_request("both", make_request(2), {}, log.callback()).has_value());
    ASSERT_TRUE(vocoder.complete("both", StagePayload{.data = "audio"}).has_value());
    ASSERT_TRUE(decode.complete("both", StagePayload{.data = "text"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(2));
    events = log.events_for("both");
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].result.data, Value(Map{{"decode", "text"}, {"vocoder", "audio"}}));

    auto failed = coordinator.start_request("f", OmniRequest{.params = Map{{"fail", true}}}, {},
                                            log.callback());
    ASSERT_FALSE(failed.has_value());
    EXPECT_EQ(failed.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(failed.error().message.find("test.coordinator.pick"), std::string::npos);
    auto unknown = coordinator.start_request("u", OmniRequest{.params = Map{{"unknown", true}}}, {},
                                             log.callback());
    ASSERT_FALSE(unknown.has_value());
    EXPECT_NE(unknown.error().message.find("'nowhere'"), std::string::npos);
    EXPECT_EQ(coordinator.live_requests(), 0u);
}

TEST_F(CoordinatorTest, AdmissionErrors) {
    auto o = options({"a"}, {"a"});
    o.max_live_requests = 2;
    auto created = Coordinator::create(o);
    ASSERT_TRUE(created.has_value());
    EventLog log;
    auto before_start = (*created)->start_request("r", make_request(1), {}, log.callback());
    ASSERT_FALSE(before_start.has_value());
    EXPECT_EQ(before_start.error().code, ErrorCode::unavailable);
    created->reset();

    auto& coordinator = start(o);
    add_stage("a");
    auto empty = coordinator.start_request("", make_request(1), {}, log.callback());
    ASSERT_FALSE(empty.has_value());
    EXPECT_EQ(empty.error().code, ErrorCode::invalid_argument);

    ASSERT_TRUE(coordinator.start_request("r1", make_request(1), {}, log.callback()).has_value());
    auto duplicate = coordinator.start_request("r1", make_request(1), {}, log.callback());
    ASSERT_FALSE(duplicate.has_value());
    EXPECT_EQ(duplicate.error().code, ErrorCode::already_exists);
    ASSERT_TRUE(coordinator.start_request("r2", make_request(1), {}, log.callback()).has_value());
    auto full = coordinator.start_request("r3", make_request(1), {}, log.callback());
    ASSERT_FALSE(full.has_value());
    EXPECT_EQ(full.error().code, ErrorCode::resource_exhausted);
    EXPECT_EQ(coordinator.live_requests(), 2u);

    // An undefined tensor cannot be encoded: refused before it is accepted.
    ASSERT_TRUE(coordinator.abort("r2", "make room").has_value());
    auto unencodable = coordinator.start_request("r4", make_request(Tensor{}), {}, log.callback());
    ASSERT_FALSE(unencodable.has_value());
    EXPECT_EQ(coordinator.live_requests(), 1u);

    coordinator.stop();
    auto stopped = coordinator.start_request("r5", make_request(1), {}, log.callback());
    ASSERT_FALSE(stopped.has_value());
    EXPECT_EQ(stopped.error().code, ErrorCode::unavailable);
    // Terminal events: r2 aborted, r1 failed by stop; none for refused requests.
    EXPECT_EQ(log.terminal_count(), 2u);
}

TEST_F(CoordinatorTest, MessagesForUnknownRequestsAreIgnored) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& stage = add_stage("a", echo_responder());
    ASSERT_TRUE(stage.complete("ghost", StagePayload{.request_id = "ghost"}).has_value());
    ASSERT_TRUE(stage.complete_with_error("ghost", Error{ErrorCode::internal, "x"}).has_value());
    ASSERT_TRUE(stage.chunk("ghost", 0, "chunk").has_value());
    ASSERT_TRUE(stage.send(proto::HeartbeatMessage{.stage = "nobody"}).has_value());
    ASSERT_TRUE(stage.send(proto::AbortMessage{.request_id = "ghost"}).has_value());
    // The echo reply travels on the same connection, after the messages above.
    ASSERT_TRUE(coordinator.submit("real", make_request(1)).has_value());
    auto health = coordinator.health();
    EXPECT_EQ(health.ignored_messages, 5u);
    EXPECT_EQ(health.requests_by_state["completed"], 1);
    EXPECT_EQ(health.requests_by_state["failed"], 0);
    EXPECT_TRUE(stage.aborts().empty());
}

TEST_F(CoordinatorTest, MalformedBytesAreDroppedAndTheCoordinatorKeepsWorking) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& stage = add_stage("a", echo_responder());
    auto valid =
        proto::encode_message(proto::CompleteMessage{.request_id = "x", .from_stage = "a"});
    ASSERT_TRUE(valid.has_value());
    std::vector<std::vector<std::uint8_t>> hostile = {
        {},
        {0xc1},
        {0xff, 0x00, 0x12, 0x34},
        std::vector<std::uint8_t>(valid->begin(), valid->begin() + valid->size() / 2),
        std::vector<std::uint8_t>(4096, 0x91),  // deeply nested arrays
    };
    for (auto bytes : hostile) ASSERT_TRUE(stage.send_bytes(std::move(bytes)).has_value());
    auto result = coordinator.submit("after", make_request("still works"));
    ASSERT_TRUE(result.has_value()) << result.error().to_string();
    EXPECT_EQ(result->data, Value("still works"));
}

TEST_F(CoordinatorTest, ProfilerControlReachesEveryStage) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    ASSERT_TRUE(coordinator.start_profile("/tmp/trace-{stage}.json").has_value());
    ASSERT_TRUE(coordinator.stop_profile().has_value());
    for (FakeStage* stage : {&a, &b}) {
        ASSERT_TRUE(stage->wait_for_messages(2));
        auto messages = stage->messages();
        auto* start = std::get_if<proto::ProfilerStartMessage>(&messages[0]);
        ASSERT_NE(start, nullptr);
        EXPECT_EQ(start->trace_path_template, "/tmp/trace-{stage}.json");
        EXPECT_TRUE(std::holds_alternative<proto::ProfilerStopMessage>(messages[1]));
    }
}

TEST_F(CoordinatorTest, StopFailsLiveRequestsAndShutsStagesDown) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    EventLog log;
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(
            coordinator.start_request("r" + std::to_string(i), make_request(i), {}, log.callback())
                .has_value());
    }
    coordinator.stop();
    // Within the call.
    ASSERT_EQ(log.terminal_count(), 3u);
    for (const auto& event : log.events()) {
        EXPECT_EQ(event.kind, RequestEvent::Kind::failed);
        EXPECT_EQ(event.error.code, ErrorCode::unavailable);
        EXPECT_EQ(event.error.message, "coordinator stopped");
    }
    EXPECT_EQ(coordinator.live_requests(), 0u);
    EXPECT_FALSE(coordinator.health().healthy);
    coordinator.stop();                   // idempotent
    ASSERT_TRUE(a.wait_for_messages(4));  // three submits, then shutdown
    EXPECT_TRUE(std::holds_alternative<proto::ShutdownMessage>(a.messages().back()));
    ASSERT_TRUE(b.wait_for_messages(1));
    EXPECT_TRUE(std::holds_alternative<proto::ShutdownMessage>(b.messages().back()));
    EXPECT_FALSE(coordinator.abort("r0", "late").has_value());
    EXPECT_FALSE(coordinator.start_profile("x").has_value());
}

TEST_F(CoordinatorTest, ThousandConcurrentRequestsEachEndExactlyOnce) {
    constexpr int kRequests = 1000;
    auto& coordinator = start(options({"echo"}, {"echo"}));
    auto& stage = add_stage("echo", [](FakeStage& stage, const proto::ControlMessage& message) {
        auto* submit = std::get_if<proto::SubmitMessage>(&message);
        if (submit == nullptr) return;
        // A chunk first, so chunk-before-terminal ordering is exercised under load.
        EXPECT_TRUE(stage.chunk(submit->request_id, 0, submit->payload.data).has_value());
        EXPECT_TRUE(stage.complete(submit->request_id, submit->payload).has_value());
    });
    EventLog log;
    // Four threads start requests at once; the echo replies race with start_request.
    std::vector<std::thread> starters;
    for (int t = 0; t < 4; ++t) {
        starters.emplace_back([&, t] {
            for (int i = t; i < kRequests; i += 4) {
                auto started = coordinator.start_request("req-" + std::to_string(i),
                                                         make_request(i), {}, log.callback());
                EXPECT_TRUE(started.has_value());
            }
        });
    }
    for (auto& thread : starters) thread.join();
    ASSERT_TRUE(log.wait_for_terminals(kRequests));
    std::map<std::string, std::vector<RequestEvent::Kind>> kinds;
    for (const auto& event : log.events()) kinds[event.request_id].push_back(event.kind);
    ASSERT_EQ(kinds.size(), static_cast<std::size_t>(kRequests));
    for (int i = 0; i < kRequests; ++i) {
        auto& seen = kinds["req-" + std::to_string(i)];
        ASSERT_EQ(seen.size(), 2u) << i;
        EXPECT_EQ(seen[0], RequestEvent::Kind::chunk);
        EXPECT_EQ(seen[1], RequestEvent::Kind::completed);
    }
    for (const auto& event : log.events()) {
        if (event.kind != RequestEvent::Kind::completed) continue;
        EXPECT_EQ("req-" + std::to_string(event.result.data.as_int()), event.request_id);
    }
    EXPECT_EQ(coordinator.live_requests(), 0u);
    EXPECT_EQ(coordinator.health().requests_by_state["completed"], kRequests);
    EXPECT_EQ(stage.submits().size(), static_cast<std::size_t>(kRequests));

    // Blocking submits from several threads at once.
    std::vector<std::thread> submitters;
    for (int t = 0; t < 4; ++t) {
        submitters.emplace_back([&, t] {
            for (int i = 0; i < 25; ++i) {
                auto result = coordinator.submit("s-" + std::to_string(t) + "-" + std::to_string(i),
                                                 make_request(i));
                ASSERT_TRUE(result.has_value());
                EXPECT_EQ(result->data, Value(i));
            }
        });
    }
    for (auto& thread : submitters) thread.join();
    EXPECT_EQ(coordinator.health().requests_by_state["completed"], kRequests + 100);
}

TEST_F(CoordinatorTest, PauseIsBroadcastOnChangeAndACompletionWhilePausedResumes) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    wait_for_stages();
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("r1", make_request(1), {}, log.callback()).has_value());
    ASSERT_TRUE(a.wait_for_messages(1));  // the submit: r1 is running

    ASSERT_TRUE(coordinator.pause("r1", true).has_value());
    ASSERT_TRUE(coordinator.pause("r1", true).has_value());  // no change: not broadcast again
    ASSERT_TRUE(coordinator.pause("r1", false).has_value());
    ASSERT_TRUE(coordinator.pause("r1", true).has_value());
    auto unknown = coordinator.pause("ghost", true);
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
    ASSERT_TRUE(b.wait_for_pauses(3));
    for (FakeStage* stage : {&a, &b}) {  // every stage hears them, in order
        ASSERT_TRUE(stage->wait_for_pauses(3));
        std::vector<proto::PauseMessage> expected = {{"r1", true}, {"r1", false}, {"r1", true}};
        EXPECT_EQ(stage->pauses(), expected) << stage->name();
    }

    // The request completes while paused: a resume follows, so no stage keeps the pause.
    ASSERT_TRUE(b.complete("r1", StagePayload{.request_id = "r1"}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    ASSERT_TRUE(a.wait_for_pauses(4));
    EXPECT_EQ(a.pauses().back(), (proto::PauseMessage{"r1", false}));
    auto ended = coordinator.pause("r1", false);
    ASSERT_FALSE(ended.has_value());
    EXPECT_EQ(ended.error().code, ErrorCode::not_found);
    EXPECT_TRUE(a.aborts().empty());
}

}  // namespace
}  // namespace omnirt::pipeline::testing

// Coordinator streams: chunk order, the terminal event, timeouts, a stream dropped early, a
// consumer that falls behind, and callbacks that end their own request.
#include <gtest/gtest.h>

#include <thread>

#include "pipeline/client_stream.h"
#include "pipeline/coordinator.h"
#include "pipeline/fake_stage.h"

namespace omnirt::pipeline::testing {
namespace {

using CoordinatorStreamTest = CoordinatorTest;

// Waits for the next event of a stream (hang guard only).
RequestEvent next_event(RequestStream& stream) {
    auto event = stream.next(kHangGuard);
    EXPECT_TRUE(event.has_value()) << event.error().to_string();
    if (!event || !*event) {
        ADD_FAILURE() << "stream ended early";
        return {};
    }
    return std::move(**event);
}

TEST_F(CoordinatorStreamTest, ChunksArriveInOrderThenTheResult) {
    constexpr int kChunks = 200;
    // Both stages are terminal: each one's chunks precede its completion on its connection.
    auto& coordinator = start(options({"a", "b"}, {"a", "b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    auto stream = coordinator.stream("r", make_request("in"));
    ASSERT_TRUE(stream.has_value()) << stream.error().to_string();
    EXPECT_EQ((*stream)->request_id(), "r");
    ASSERT_TRUE(a.wait_for_messages(1));
    for (int i = 0; i < kChunks; ++i) {
        FakeStage& sender = i % 2 == 0 ? a : b;  // chunks from two stages, interleaved per sender
        ASSERT_TRUE(
            sender.chunk("r", i / 2, Value(i), Value(Map{{"from", sender.name()}})).has_value());
    }
    ASSERT_TRUE(a.complete("r", StagePayload{.request_id = "r", .data = "done a"}).has_value());
    ASSERT_TRUE(b.complete("r", StagePayload{.request_id = "r", .data = "done b"}).has_value());

    std::map<std::string, std::vector<std::int64_t>> values_by_stage;
    for (int i = 0; i < kChunks; ++i) {
        RequestEvent event = next_event(**stream);
        ASSERT_EQ(event.kind, RequestEvent::Kind::chunk);
        EXPECT_EQ(event.request_id, "r");
        ASSERT_NE(event.metadata.find("from"), nullptr);
        EXPECT_EQ(event.metadata.find("from")->as_string(), event.from_stage);
        values_by_stage[event.from_stage].push_back(event.chunk.as_int());
        EXPECT_EQ(event.chunk_index, event.chunk.as_int() / 2);
    }
    // Each sender's chunks keep their order (ZMQ orders per connection; the coordinator keeps
    // the arrival order).
    ASSERT_EQ(values_by_stage["a"].size(), kChunks / 2u);
    ASSERT_EQ(values_by_stage["b"].size(), kChunks / 2u);
    for (int i = 0; i < kChunks / 2; ++i) {
        EXPECT_EQ(values_by_stage["a"][i], 2 * i);
        EXPECT_EQ(values_by_stage["b"][i], 2 * i + 1);
    }
    RequestEvent last = next_event(**stream);
    EXPECT_EQ(last.kind, RequestEvent::Kind::completed);
    EXPECT_EQ(last.result.data, Value(Map{{"a", "done a"}, {"b", "done b"}}));
    auto after = (*stream)->next(kHangGuard);
    ASSERT_TRUE(after.has_value());
    EXPECT_FALSE(after->has_value());
    stream->reset();
    EXPECT_TRUE(a.aborts().empty());  // an ended stream does not abort on destruction
    EXPECT_EQ(coordinator.health().requests_by_state["aborted"], 0);
}

TEST_F(CoordinatorStreamTest, NextTimesOutWithoutEvents) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& a = add_stage("a");
    auto stream = coordinator.stream("r", make_request(1));
    ASSERT_TRUE(stream.has_value());
    auto none = (*stream)->next(Duration(1));
    ASSERT_FALSE(none.has_value());
    EXPECT_EQ(none.error().code, ErrorCode::deadline_exceeded);
    ASSERT_TRUE(a.complete("r", StagePayload{.data = 2}).has_value());
    // An unbounded wait does not overflow the clock.
    auto done = (*stream)->next(Duration::max());
    ASSERT_TRUE(done.has_value() && done->has_value());
    EXPECT_EQ((*done)->kind, RequestEvent::Kind::completed);
    auto after = (*stream)->next(Duration::max());
    ASSERT_TRUE(after.has_value());
    EXPECT_FALSE(after->has_value());
}

TEST_F(CoordinatorStreamTest, ResultCanArriveBeforeStreamReturns) {
    auto& coordinator = start(options({"a"}, {"a"}));
    add_stage("a", [](FakeStage& stage, const proto::ControlMessage& message) {
        auto* submit = std::get_if<proto::SubmitMessage>(&message);
        if (submit == nullptr) return;
        EXPECT_TRUE(stage.chunk(submit->request_id, 0, "c").has_value());
        EXPECT_TRUE(stage.complete(submit->request_id, submit->payload).has_value());
    });
    for (int i = 0; i < 50; ++i) {
        auto stream = coordinator.stream("r" + std::to_string(i), make_request(i));
        ASSERT_TRUE(stream.has_value());
        EXPECT_EQ(next_event(**stream).kind, RequestEvent::Kind::chunk);
        RequestEvent done = next_event(**stream);
        EXPECT_EQ(done.kind, RequestEvent::Kind::completed);
        EXPECT_EQ(done.result.data, Value(i));
    }
    EXPECT_EQ(coordinator.live_requests(), 0u);
}

TEST_F(CoordinatorStreamTest, DroppingAStreamEarlyAbortsTheRequest) {
    auto& coordinator = start(options({"a", "b"}, {"b"}));
    auto& a = add_stage("a");
    auto& b = add_stage("b");
    wait_for_stages();
    {
        auto stream = coordinator.stream("r", make_request(1));
        ASSERT_TRUE(stream.has_value());
        ASSERT_TRUE(a.chunk("r", 0, "partial").has_value());
        EXPECT_EQ(next_event(**stream).kind, RequestEvent::Kind::chunk);
    }
    EXPECT_EQ(coordinator.live_requests(), 0u);
    EXPECT_EQ(coordinator.health().requests_by_state["aborted"], 1);
    for (FakeStage* stage : {&a, &b}) {
        ASSERT_TRUE(stage->wait_for_aborts(1));
        EXPECT_EQ(stage->aborts()[0].request_id, "r");
    }
    // The stage's late result is ignored; a later request on the same connection shows that it
    // was processed.
    ASSERT_TRUE(b.complete("r", StagePayload{}).has_value());
    EventLog log;
    ASSERT_TRUE(coordinator.start_request("sync", make_request(2), {}, log.callback()).has_value());
    ASSERT_TRUE(b.complete("sync", StagePayload{}).has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    auto health = coordinator.health();
    EXPECT_EQ(health.requests_by_state["completed"], 1);
    EXPECT_EQ(health.ignored_messages, 1u);
}

TEST_F(CoordinatorStreamTest, SubmitDiscardsChunks) {
    auto& coordinator = start(options({"a"}, {"a"}));
    add_stage("a", [](FakeStage& stage, const proto::ControlMessage& message) {
        auto* submit = std::get_if<proto::SubmitMessage>(&message);
        if (submit == nullptr) return;
        for (int i = 0; i < 10; ++i) EXPECT_TRUE(stage.chunk(submit->request_id, i, i).has_value());
        EXPECT_TRUE(stage.complete(submit->request_id, submit->payload).has_value());
    });
    auto result = coordinator.submit("r", make_request("x"));
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->data, Value("x"));
}

TEST_F(CoordinatorStreamTest, AConsumerThatFallsBehindFailsTheRequest) {
    auto o = options({"a"}, {"a"});
    o.stream_queue_capacity = 4;
    auto& coordinator = start(o);
    auto& a = add_stage("a");
    wait_for_stages();
    auto stream = coordinator.stream("r", make_request(1));
    ASSERT_TRUE(stream.has_value());
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(a.chunk("r", i, i).has_value());
    // The abort broadcast shows that the coordinator gave up on the request.
    ASSERT_TRUE(a.wait_for_aborts(1));
    for (int i = 0; i < 4; ++i) {
        RequestEvent event = next_event(**stream);
        ASSERT_EQ(event.kind, RequestEvent::Kind::chunk);
        EXPECT_EQ(event.chunk_index, i);
    }
    RequestEvent failed = next_event(**stream);
    EXPECT_EQ(failed.kind, RequestEvent::Kind::failed);
    EXPECT_EQ(failed.error.code, ErrorCode::resource_exhausted);
    EXPECT_EQ(coordinator.live_requests(), 0u);
}

TEST_F(CoordinatorStreamTest, ACallbackMayAbortItsOwnRequest) {
    auto& coordinator = start(options({"a"}, {"a"}));
    auto& a = add_stage("a");
    wait_for_stages();  // the abort is broadcast: "a" must have joined before it is sent
    EventLog log;
    auto inner = log.callback();
    Coordinator* c = &coordinator;
    auto callback = [&, inner, c](RequestEvent event) {
        bool first_chunk = event.kind == RequestEvent::Kind::chunk && event.chunk_index == 0;
        std::string id = event.request_id;
        inner(std::move(event));
        if (first_chunk) EXPECT_TRUE(c->abort(id, "seen enough").has_value());
    };
    ASSERT_TRUE(coordinator.start_request("r", make_request(1), {}, callback).has_value());
    ASSERT_TRUE(a.chunk("r", 0, "one").has_value());
    ASSERT_TRUE(a.chunk("r", 1, "two").has_value());
    ASSERT_TRUE(log.wait_for_terminals(1));
    ASSERT_TRUE(a.wait_for_aborts(1));
    auto events = log.events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].kind, RequestEvent::Kind::chunk);
    EXPECT_EQ(events[1].kind, RequestEvent::Kind::aborted);
    EXPECT_EQ(events[1].error.code, ErrorCode::aborted);
    EXPECT_EQ(events[1].error.message, "seen enough");
}

TEST_F(CoordinatorStreamTest, StreamsEndedByStopDoNotTouchTheCoordinator) {
    auto& coordinator = start(options({"a"}, {"a"}));
    add_stage("a");
    auto stream = coordinator.stream("r", make_request(1));
    ASSERT_TRUE(stream.has_value());
    coordinator_.reset();  // stops: the request fails, then the coordinator is gone
    RequestEvent event = next_event(**stream);
    EXPECT_EQ(event.kind, RequestEvent::Kind::failed);
    EXPECT_EQ(event.error.code, ErrorCode::unavailable);
    stream->reset();
}

}  // namespace
}  // namespace omnirt::pipeline::testing

namespace omnirt::pipeline::testing {
namespace {

TEST_F(CoordinatorStreamTest, ACompletionWaitsForTheClientChunksItAccountsFor) {
    // "thinker" streams to the client, "decode" is the terminal stage; decode's completion
    // overtakes the thinker's chunks (different connections), and says 3 were sent.
    auto& coordinator = start(options({"thinker", "decode"}, {"decode"}));
    auto& thinker = add_stage("thinker");
    auto& decode = add_stage("decode");
    auto stream = coordinator.stream("r", make_request("in"));
    ASSERT_TRUE(stream.has_value()) << stream.error().to_string();
    ASSERT_TRUE(thinker.wait_for_messages(1));
    StagePayload result{.request_id = "r", .data = "text"};
    record_client_chunks(result.request, "thinker", 3);
    ASSERT_TRUE(decode.complete("r", result).has_value());
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(thinker.chunk("r", i, Value(i)).has_value());
        RequestEvent event = next_event(**stream);
        ASSERT_EQ(event.kind, RequestEvent::Kind::chunk) << "chunk " << i;
        EXPECT_EQ(event.chunk_index, i);
    }
    RequestEvent end = next_event(**stream);
    EXPECT_EQ(end.kind, RequestEvent::Kind::completed);
    EXPECT_EQ(end.result.data, Value("text"));
    EXPECT_EQ(coordinator.live_requests(), 0u);
}

TEST(ClientStream, RecordsAndReadsCountsIgnoringMalformedEntries) {
    OmniRequest request;
    EXPECT_TRUE(recorded_client_chunks(request).empty());
    record_client_chunks(request, "a", 2);
    record_client_chunks(request, "b", 5);
    record_client_chunks(request, "a", 1);  // the larger count stays
    EXPECT_EQ(recorded_client_chunks(request),
              (std::map<std::string, std::int64_t>{{"a", 2}, {"b", 5}}));
    request.metadata[kClientChunksKey]["c"] = "many";
    request.metadata[kClientChunksKey]["d"] = -4;
    EXPECT_EQ(recorded_client_chunks(request).size(), 2u);
    request.metadata = Map{{std::string(kClientChunksKey), Value("garbage")}};
    EXPECT_TRUE(recorded_client_chunks(request).empty());
    record_client_chunks(request, "a", 1);
    EXPECT_EQ(recorded_client_chunks(request).at("a"), 1);
}

}  // namespace
}  // namespace omnirt::pipeline::testing

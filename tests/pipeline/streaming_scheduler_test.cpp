#include "pipeline/streaming_scheduler.h"

#include <gtest/gtest.h>

#include <any>
#include <filesystem>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace omnirt::pipeline {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
constexpr auto kHangGuard = 30s;

std::size_t thread_count() {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/task")) ++count;
    return count;
}

// A joined thread leaves /proc/self/task a moment after pthread_join returns.
bool threads_back_to(std::size_t expected) {
    const auto deadline = Clock::now() + kHangGuard;
    while (thread_count() > expected) {
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(1ms);
    }
    return thread_count() == expected;
}

IncomingMessage new_request(const std::string& id, Value data = {}) {
    return IncomingMessage{.request_id = id,
                           .kind = IncomingKind::new_request,
                           .payload = std::make_shared<const StagePayload>(
                               StagePayload{.request_id = id, .data = std::move(data)})};
}

IncomingMessage chunk(const std::string& id, const std::string& from, Value value,
                      std::int64_t chunk_id = 0) {
    return IncomingMessage{.request_id = id,
                           .kind = IncomingKind::stream_chunk,
                           .chunk = std::make_shared<const StreamChunk>(
                               StreamChunk{.chunk_id = chunk_id, .chunk = value}),
                           .from_stage = from};
}

IncomingMessage done(const std::string& id, const std::string& from) {
    return IncomingMessage{.request_id = id, .kind = IncomingKind::stream_done, .from_stage = from};
}

// Records what the handler saw: the chunks (with their sender) and whether the payload came
// before them; echoes each chunk to the client.
StreamingHandler recording_handler() {
    return StreamingHandler{
        .on_new_request = [](StreamRequestState& state, Emitter&) -> Status {
            if (!state.user.has_value()) state.user = List{};
            std::any_cast<List&>(state.user).push_back(Value("payload"));
            return ok_status();
        },
        .on_chunk = [](StreamRequestState& state, const std::string& from, const StreamChunk& c,
                       Emitter& emit) -> Status {
            if (c.chunk == Value("fail")) return fail(ErrorCode::data_loss, "bad chunk");
            if (!state.user.has_value()) state.user = List{};
            std::any_cast<List&>(state.user).push_back(Value(from + ":" + c.chunk.as_string()));
            if (c.chunk == Value("echo")) emit.emit(c.chunk);
            return ok_status();
        },
        .on_done = [](StreamRequestState& state, Emitter&) -> Result<StagePayload> {
            if (state.payload->data == Value("fail at done")) {
                return fail(ErrorCode::internal, "flush failed");
            }
            return StagePayload{
                .request_id = state.request_id,
                .data = Value(
                    Map{{"seen", state.user.has_value() ? Value(std::any_cast<List&>(state.user))
                                                        : Value(List{})},
                        {"chunks", Value(state.chunks_received)}})};
        },
    };
}

class StreamingSchedulerTest : public ::testing::Test {
  protected:
    void start(std::vector<std::string> sources = {"talker"}, bool require_done = true) {
        auto scheduler = StreamingScheduler::create({.stage_name = "code2wav",
                                                     .stream_sources = std::move(sources),
                                                     .handler = recording_handler(),
                                                     .require_stream_done = require_done});
        ASSERT_TRUE(scheduler.has_value()) << scheduler.error().to_string();
        scheduler_ = std::move(*scheduler);
        ASSERT_TRUE(scheduler_->start().has_value());
    }
    void push(IncomingMessage message) {
        ASSERT_TRUE(scheduler_->inbox().push(std::move(message)));
    }
    std::optional<OutgoingMessage> next() {
        return scheduler_->outbox().pop_until(Clock::now() + kHangGuard);
    }
    // Runs a whole request through the (single) worker and expects its result to be the next
    // output: every message pushed before it has been handled and produced nothing.
    void expect_nothing_pending_before_barrier(const std::string& barrier_id) {
        push(new_request(barrier_id));
        push(done(barrier_id, "talker"));
        auto out = next();
        ASSERT_TRUE(out.has_value());
        EXPECT_EQ(out->request_id, barrier_id);
        EXPECT_EQ(out->kind, OutgoingKind::result);
    }
    static List seen(const OutgoingMessage& out) {
        EXPECT_EQ(out.kind, OutgoingKind::result) << out.error.to_string();
        if (out.result == nullptr) return {};
        return out.result->data.find("seen")->as_list();
    }

    std::unique_ptr<StreamingScheduler> scheduler_;
};

TEST_F(StreamingSchedulerTest, CreateNeedsOnChunkAndOnDone) {
    StreamingHandler handler = recording_handler();
    handler.on_done = nullptr;
    auto scheduler = StreamingScheduler::create({.stage_name = "s", .handler = handler});
    ASSERT_FALSE(scheduler.has_value());
    EXPECT_EQ(scheduler.error().code, ErrorCode::invalid_argument);
    handler = recording_handler();
    handler.on_chunk = nullptr;
    EXPECT_FALSE(StreamingScheduler::create({.stage_name = "s", .handler = handler}).has_value());
}

TEST_F(StreamingSchedulerTest, ChunksBeforeThePayloadAreKeptInOrderAndTheResultWaitsForDone) {
    const std::size_t threads_before = thread_count();
    start();
    push(chunk("r", "talker", Value("a")));
    push(chunk("r", "talker", Value("b")));
    push(new_request("r"));
    push(chunk("r", "talker", Value("c")));
    expect_nothing_pending_before_barrier("barrier");
    EXPECT_EQ(scheduler_->active_requests(), 1u);  // r is open
    push(done("r", "talker"));
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(seen(*out),
              (List{Value("talker:a"), Value("talker:b"), Value("payload"), Value("talker:c")}));
    EXPECT_EQ(*out->result->data.find("chunks"), Value(3));
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    scheduler_->stop();
    EXPECT_EQ(scheduler_->outbox().pop(), std::nullopt);
    EXPECT_TRUE(threads_back_to(threads_before));
}

TEST_F(StreamingSchedulerTest, APausedRequestEmitsNothingUntilItsResumeReplaysItsChunks) {
    start();
    scheduler_->pause("r", true);  // before its first message
    push(new_request("r"));
    push(chunk("r", "talker", Value("echo")));
    push(chunk("r", "talker", Value("b")));
    push(done("r", "talker"));
    // Handled behind the held request: nothing of r came out, other requests go on.
    expect_nothing_pending_before_barrier("barrier");
    EXPECT_EQ(scheduler_->load().paused_requests, 1);
    EXPECT_EQ(scheduler_->active_requests(), 1u);
    scheduler_->pause("r", false);
    auto echoed = next();
    ASSERT_TRUE(echoed.has_value());
    EXPECT_EQ(echoed->kind, OutgoingKind::stream);
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(seen(*out), (List{Value("payload"), Value("talker:echo"), Value("talker:b")}));
    EXPECT_EQ(scheduler_->load().paused_requests, 0);
}

TEST_F(StreamingSchedulerTest, AnAbortOfAPausedRequestDropsWhatWasKept) {
    start();
    push(new_request("r"));
    expect_nothing_pending_before_barrier("barrier1");
    scheduler_->pause("r", true);
    push(chunk("r", "talker", Value("echo")));
    expect_nothing_pending_before_barrier("barrier2");
    scheduler_->abort("r");
    scheduler_->pause("r", true);  // after its end: not kept
    EXPECT_EQ(scheduler_->load().paused_requests, 0);
    expect_nothing_pending_before_barrier("barrier3");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(StreamingSchedulerTest, DoneBeforeThePayloadFinishesWhenThePayloadArrives) {
    start();
    push(chunk("r", "talker", Value("a")));
    push(done("r", "talker"));
    expect_nothing_pending_before_barrier("barrier");
    push(new_request("r"));
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(seen(*out), (List{Value("talker:a"), Value("payload")}));
}

TEST_F(StreamingSchedulerTest, EverySourceThatSentMustSendDone) {
    start({"thinker", "talker"});
    push(new_request("r"));
    push(chunk("r", "thinker", Value("x")));
    push(chunk("r", "talker", Value("y")));
    push(done("r", "talker"));
    expect_nothing_pending_before_barrier("barrier");  // thinker sent but is not done
    push(done("r", "thinker"));
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(seen(*out), (List{Value("payload"), Value("thinker:x"), Value("talker:y")}));
}

TEST_F(StreamingSchedulerTest, WithStreamSourcesAtLeastOneDoneIsRequired) {
    start({"talker"});
    push(new_request("r"));
    expect_nothing_pending_before_barrier("barrier");
    EXPECT_EQ(scheduler_->active_requests(), 1u);
    push(done("r", "talker"));  // a done without chunks: an empty stream
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(seen(*out), (List{Value("payload")}));
}

TEST_F(StreamingSchedulerTest, WithoutRequireStreamDoneThePayloadAloneFinishes) {
    start({"talker"}, /*require_done=*/false);
    push(new_request("r"));
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(out->kind, OutgoingKind::result);
}

TEST_F(StreamingSchedulerTest, WithoutStreamSourcesThePayloadAloneFinishes) {
    start({});
    push(new_request("r"));
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(StreamingSchedulerTest, HandlerEmitsStreamChunksWithIds) {
    start();
    push(new_request("r"));
    push(chunk("r", "talker", Value("echo")));
    push(chunk("r", "talker", Value("echo")));
    push(done("r", "talker"));
    for (std::int64_t id = 0; id < 2; ++id) {
        auto out = next();
        ASSERT_TRUE(out.has_value());
        EXPECT_EQ(out->kind, OutgoingKind::stream);
        EXPECT_EQ(out->target, std::nullopt);
        EXPECT_EQ(out->chunk->chunk_id, id);
        EXPECT_EQ(out->chunk->chunk, Value("echo"));
    }
    auto result = next();
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->kind, OutgoingKind::result);
}

TEST_F(StreamingSchedulerTest, HandlerErrorsFailTheRequestAndFreeItsState) {
    start();
    push(new_request("r"));
    push(chunk("r", "talker", Value("fail")));
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(out->kind, OutgoingKind::error);
    EXPECT_EQ(out->error, (Error{ErrorCode::data_loss, "bad chunk"}));
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    // Late messages of the failed request start nothing.
    push(chunk("r", "talker", Value("late")));
    push(done("r", "talker"));
    expect_nothing_pending_before_barrier("barrier");
    EXPECT_EQ(scheduler_->active_requests(), 0u);

    push(new_request("d", Value("fail at done")));
    push(done("d", "talker"));
    auto flush = next();
    ASSERT_TRUE(flush.has_value());
    EXPECT_EQ(flush->kind, OutgoingKind::error);
    EXPECT_EQ(flush->error.message, "flush failed");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(StreamingSchedulerTest, AbortFreesTheStateAndLaterMessagesAreDropped) {
    start();
    push(chunk("r", "talker", Value("a")));
    push(new_request("r"));
    expect_nothing_pending_before_barrier("barrier1");
    EXPECT_EQ(scheduler_->active_requests(), 1u);
    scheduler_->abort("r");
    scheduler_->abort("r");
    scheduler_->abort("never seen");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    push(chunk("r", "talker", Value("b")));
    push(done("r", "talker"));
    expect_nothing_pending_before_barrier("barrier2");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(StreamingSchedulerTest, ManyInterleavedRequestsKeepTheirOwnOrder) {
    start({"talker"});
    constexpr int kRequests = 20;
    constexpr int kChunks = 10;
    for (int c = 0; c < kChunks; ++c) {
        for (int r = 0; r < kRequests; ++r) {
            const std::string id = "r" + std::to_string(r);
            if (c == kChunks / 2) push(new_request(id));
            push(chunk(id, "talker", Value(std::to_string(c)), c));
        }
    }
    for (int r = kRequests - 1; r >= 0; --r) push(done("r" + std::to_string(r), "talker"));
    EXPECT_LE(scheduler_->active_requests(), static_cast<std::size_t>(kRequests));
    for (int r = kRequests - 1; r >= 0; --r) {
        auto out = next();
        ASSERT_TRUE(out.has_value());
        EXPECT_EQ(out->request_id, "r" + std::to_string(r));  // finish in done order
        List expected;
        for (int c = 0; c < kChunks; ++c) {
            if (c == kChunks / 2) expected.push_back(Value("payload"));
            expected.push_back(Value("talker:" + std::to_string(c)));
        }
        EXPECT_EQ(seen(*out), expected);
    }
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(StreamingSchedulerTest, MalformedAndDuplicateMessagesAreDropped) {
    start({});
    push(IncomingMessage{.request_id = "x", .kind = IncomingKind::new_request});   // no payload
    push(IncomingMessage{.request_id = "y", .kind = IncomingKind::stream_chunk});  // no chunk
    expect_nothing_pending_before_barrier("barrier");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(StreamingSchedulerTest, StopFreesOpenStatesWithoutAResult) {
    const std::size_t threads_before = thread_count();
    start();
    for (int r = 0; r < 5; ++r) push(chunk("r" + std::to_string(r), "talker", Value("a")));
    expect_nothing_pending_before_barrier("barrier");
    EXPECT_EQ(scheduler_->active_requests(), 5u);
    scheduler_->stop();
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    EXPECT_EQ(scheduler_->outbox().pop(), std::nullopt);
    EXPECT_FALSE(scheduler_->inbox().push(new_request("after")));
    scheduler_->stop();
    scheduler_.reset();
    EXPECT_TRUE(threads_back_to(threads_before));
}

TEST_F(StreamingSchedulerTest, AbortWakesAHandlerWaitingInside) {
    std::promise<void> waiting;
    StreamingHandler handler = recording_handler();
    handler.on_chunk = [&](StreamRequestState&, const std::string&, const StreamChunk&,
                           Emitter& emit) -> Status {
        waiting.set_value();
        EXPECT_TRUE(emit.wait_for_abort(kHangGuard));
        EXPECT_TRUE(emit.aborted());
        EXPECT_FALSE(emit.emit(Value("dropped")));
        return ok_status();
    };
    auto scheduler = StreamingScheduler::create(
        {.stage_name = "s", .stream_sources = {"talker"}, .handler = handler});
    ASSERT_TRUE(scheduler.has_value());
    scheduler_ = std::move(*scheduler);
    ASSERT_TRUE(scheduler_->start().has_value());
    push(new_request("r"));
    push(chunk("r", "talker", Value("a")));
    push(done("r", "talker"));  // removed by the abort
    ASSERT_EQ(waiting.get_future().wait_for(kHangGuard), std::future_status::ready);
    scheduler_->abort("r");
    expect_nothing_pending_before_barrier("barrier");
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

// on_step: every pending request queued before the start is handled in one step (their chunks
// were all handled first); one item's error fails that request only; a finishing request gets
// a step (item.finishing) before on_done; the step's work may take several steps.
TEST_F(StreamingSchedulerTest, OnStepBatchesThePendingRequests) {
    struct Work {
        std::int64_t left = 0;  // chunks not yet "computed"
        std::int64_t steps = 0;
        bool flushed = false;
    };
    std::vector<std::size_t> step_sizes;  // worker thread; read after the results
    StreamingHandler handler = recording_handler();
    handler.on_new_request = nullptr;
    handler.on_chunk = [](StreamRequestState& state, const std::string&, const StreamChunk& c,
                          Emitter&) -> Status {
        if (!state.user.has_value()) state.user = Work{};
        std::any_cast<Work&>(state.user).left += c.chunk == Value("two") ? 2 : 1;
        state.pending = true;
        return ok_status();
    };
    handler.on_done = [](StreamRequestState& state, Emitter&) -> Result<StagePayload> {
        const Work& work = std::any_cast<Work&>(state.user);
        EXPECT_EQ(work.left, 0);
        return StagePayload{
            .request_id = state.request_id,
            .data = Value(Map{{"steps", Value(work.steps)}, {"flushed", Value(work.flushed)}})};
    };
    handler.on_step = [&](std::vector<StreamStepItem>& items) {
        step_sizes.push_back(items.size());
        for (StreamStepItem& item : items) {
            Work& work = std::any_cast<Work&>(item.state->user);
            if (item.state->request_id == "bad") {
                item.status = fail(ErrorCode::data_loss, "step failed");
                continue;
            }
            if (work.left > 0) {
                --work.left;
                ++work.steps;
                item.emit->emit(Value(item.state->request_id));
            }
            if (item.finishing && work.left == 0) work.flushed = true;
            item.state->pending = work.left > 0;
        }
    };
    auto scheduler = StreamingScheduler::create(
        {.stage_name = "s", .stream_sources = {"talker"}, .handler = handler});
    ASSERT_TRUE(scheduler.has_value());
    scheduler_ = std::move(*scheduler);
    for (const char* id : {"a", "b", "bad"}) {
        push(chunk(id, "talker", Value(std::string(id) == "b" ? "two" : "one")));
        push(new_request(id));
        push(done(id, "talker"));
    }
    ASSERT_TRUE(scheduler_->start().has_value());
    std::map<std::string, std::int64_t> streamed;
    std::map<std::string, OutgoingMessage> last;
    while (last.size() < 3) {
        auto out = next();
        ASSERT_TRUE(out.has_value());
        if (out->kind == OutgoingKind::stream) {
            ++streamed[out->request_id];
        } else {
            last[out->request_id] = std::move(*out);
        }
    }
    EXPECT_EQ(last["bad"].kind, OutgoingKind::error);
    EXPECT_EQ(last["bad"].error.code, ErrorCode::data_loss);
    EXPECT_EQ(streamed["bad"], 0);
    ASSERT_EQ(last["a"].kind, OutgoingKind::result);
    ASSERT_EQ(last["b"].kind, OutgoingKind::result);
    EXPECT_EQ(last["a"].result->data.find("steps")->as_int(), 1);
    EXPECT_EQ(last["b"].result->data.find("steps")->as_int(), 2);
    EXPECT_TRUE(last["a"].result->data.find("flushed")->as_bool());
    EXPECT_TRUE(last["b"].result->data.find("flushed")->as_bool());
    EXPECT_EQ(streamed["a"], 1);
    EXPECT_EQ(streamed["b"], 2);
    ASSERT_EQ(step_sizes.size(), 2u);
    EXPECT_EQ(step_sizes[0], 3u);
    EXPECT_EQ(step_sizes[1], 1u);  // "b" alone: "a" finished, "bad" failed
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

// An aborted pending request is dropped from the next step and freed.
TEST_F(StreamingSchedulerTest, OnStepSkipsAbortedRequests) {
    std::promise<void> in_step;
    std::promise<void> aborted;
    std::vector<std::string> stepped;
    StreamingHandler handler = recording_handler();
    handler.on_chunk = [](StreamRequestState& state, const std::string&, const StreamChunk&,
                          Emitter&) -> Status {
        state.pending = true;
        return ok_status();
    };
    bool first = true;
    handler.on_step = [&](std::vector<StreamStepItem>& items) {
        for (StreamStepItem& item : items) stepped.push_back(item.state->request_id);
        if (first) {
            first = false;
            in_step.set_value();
            // "x" is aborted while this step runs; its emit is dropped; it stays pending.
            EXPECT_EQ(aborted.get_future().wait_for(kHangGuard), std::future_status::ready);
            for (StreamStepItem& item : items) {
                if (item.state->request_id == "x") {
                    EXPECT_TRUE(item.emit->aborted());
                    EXPECT_FALSE(item.emit->emit(Value("dropped")));
                } else {
                    item.state->pending = false;
                }
            }
            return;
        }
        for (StreamStepItem& item : items) item.state->pending = false;
    };
    auto scheduler = StreamingScheduler::create(
        {.stage_name = "s", .stream_sources = {"talker"}, .handler = handler});
    ASSERT_TRUE(scheduler.has_value());
    scheduler_ = std::move(*scheduler);
    push(chunk("x", "talker", Value("a")));
    push(chunk("y", "talker", Value("a")));
    ASSERT_TRUE(scheduler_->start().has_value());
    ASSERT_EQ(in_step.get_future().wait_for(kHangGuard), std::future_status::ready);
    scheduler_->abort("x");
    aborted.set_value();
    push(new_request("y"));
    push(done("y", "talker"));
    auto out = next();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "y");
    EXPECT_EQ(out->kind, OutgoingKind::result);
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    // Step 1 had both; later steps only "y".
    ASSERT_GE(stepped.size(), 3u);
    EXPECT_EQ(stepped[0], "x");
    EXPECT_EQ(stepped[1], "y");
    for (std::size_t i = 2; i < stepped.size(); ++i) EXPECT_EQ(stepped[i], "y");
}

// stop() ends a worker that still has pending work (a step that never finishes its requests)
// and frees every state without a result.
TEST_F(StreamingSchedulerTest, StopEndsPendingWork) {
    std::promise<void> stepped;
    bool first = true;
    StreamingHandler handler = recording_handler();
    handler.on_chunk = [](StreamRequestState& state, const std::string&, const StreamChunk&,
                          Emitter&) -> Status {
        state.pending = true;
        return ok_status();
    };
    handler.on_step = [&](std::vector<StreamStepItem>&) {
        if (first) stepped.set_value();
        first = false;
    };
    auto scheduler = StreamingScheduler::create(
        {.stage_name = "s", .stream_sources = {"talker"}, .handler = handler});
    ASSERT_TRUE(scheduler.has_value());
    scheduler_ = std::move(*scheduler);
    ASSERT_TRUE(scheduler_->start().has_value());
    push(chunk("r", "talker", Value("a")));
    ASSERT_EQ(stepped.get_future().wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(scheduler_->active_requests(), 1u);
    scheduler_->stop();
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    EXPECT_EQ(scheduler_->outbox().pop(), std::nullopt);
}

}  // namespace
}  // namespace omnirt::pipeline

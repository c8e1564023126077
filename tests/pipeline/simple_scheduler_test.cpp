#include "pipeline/simple_scheduler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "pipeline/trace.h"

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

// A joined thread leaves /proc/self/task a moment after pthread_join returns (the kernel reaps
// it after clearing its tid), so the leak check allows that moment.
bool threads_back_to(std::size_t expected) {
    const auto deadline = Clock::now() + kHangGuard;
    while (thread_count() > expected) {
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(1ms);
    }
    return thread_count() == expected;
}

// A one-shot latch that a compute function waits on (with a hang guard).
class Gate {
  public:
    void open() {
        {
            std::lock_guard lock(mutex_);
            open_ = true;
        }
        cv_.notify_all();
    }
    bool wait() {
        std::unique_lock lock(mutex_);
        return cv_.wait_for(lock, kHangGuard, [&] { return open_; });
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool open_ = false;
};

IncomingMessage request(const std::string& id, Value data = {}) {
    return IncomingMessage{.request_id = id,
                           .kind = IncomingKind::new_request,
                           .payload = std::make_shared<const StagePayload>(
                               StagePayload{.request_id = id, .data = data})};
}

std::optional<OutgoingMessage> next_out(Scheduler& scheduler) {
    return scheduler.outbox().pop_until(Clock::now() + kHangGuard);
}

Result<StagePayload> doubled(const StagePayload& input, Emitter&) {
    StagePayload out = input;
    out.data = Value(input.data.as_int() * 2);
    return out;
}

std::unique_ptr<SimpleScheduler> make(SimpleSchedulerOptions options) {
    if (options.stage_name.empty()) options.stage_name = "test";
    auto scheduler = SimpleScheduler::create(std::move(options));
    EXPECT_TRUE(scheduler.has_value()) << scheduler.error().to_string();
    return scheduler.has_value() ? std::move(*scheduler) : nullptr;
}

TEST(SimpleSchedulerTest, CreateRejectsInvalidOptions) {
    auto batch = [](const std::vector<BatchItem>&) { return std::vector<Result<StagePayload>>{}; };
    const SimpleSchedulerOptions invalid[] = {
        {.stage_name = "s"},
        {.stage_name = "s", .compute = doubled, .batch_compute = batch},
        {.stage_name = "s", .compute = doubled, .max_batch_size = 0},
        {.stage_name = "s", .compute = doubled, .worker_threads = 0},
        {.stage_name = "s", .compute = doubled, .max_batch_size = 2},
        {.stage_name = "s", .batch_compute = batch, .max_batch_wait = -1us},
        {.stage_name = "s", .batch_compute = batch, .max_batch_size = 4, .inline_when_idle = true},
    };
    for (const auto& options : invalid) {
        auto scheduler = SimpleScheduler::create(options);
        ASSERT_FALSE(scheduler.has_value());
        EXPECT_EQ(scheduler.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(scheduler.error().message.find("stage 's'"), std::string::npos);
    }
}

TEST(SimpleSchedulerTest, ResultsLeaveInArrivalOrder) {
    const std::size_t threads_before = thread_count();
    auto scheduler = make({.compute = doubled});
    ASSERT_TRUE(scheduler->start().has_value());
    EXPECT_FALSE(scheduler->start().has_value());  // only once
    for (int i = 0; i < 50; ++i)
        ASSERT_TRUE(scheduler->inbox().push(request("r" + std::to_string(i), i)));
    for (int i = 0; i < 50; ++i) {
        auto out = next_out(*scheduler);
        ASSERT_TRUE(out.has_value());
        EXPECT_EQ(out->kind, OutgoingKind::result);
        EXPECT_EQ(out->request_id, "r" + std::to_string(i));
        ASSERT_NE(out->result, nullptr);
        EXPECT_EQ(out->result->data, Value(2 * i));
    }
    EXPECT_EQ(scheduler->active_requests(), 0u);
    scheduler->stop();
    EXPECT_EQ(scheduler->outbox().pop(), std::nullopt);  // closed
    EXPECT_TRUE(threads_back_to(threads_before));
}

TEST(SimpleSchedulerTest, ComputeErrorsBecomeErrorMessages) {
    auto scheduler =
        make({.compute = [](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
            if (input.request_id == "bad") return fail(ErrorCode::out_of_range, "too big");
            return input;
        }});
    ASSERT_TRUE(scheduler->start().has_value());
    ASSERT_TRUE(scheduler->inbox().push(request("bad")));
    ASSERT_TRUE(scheduler->inbox().push(request("good")));
    auto error = next_out(*scheduler);
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->kind, OutgoingKind::error);
    EXPECT_EQ(error->request_id, "bad");
    EXPECT_EQ(error->error, (Error{ErrorCode::out_of_range, "too big"}));
    EXPECT_EQ(error->result, nullptr);
    auto good = next_out(*scheduler);
    ASSERT_TRUE(good.has_value());
    EXPECT_EQ(good->kind, OutgoingKind::result);
    EXPECT_EQ(good->request_id, "good");
}

TEST(SimpleSchedulerTest, EmitterStreamsChunksWithPerTargetIdsBeforeTheResult) {
    auto scheduler =
        make({.compute = [](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
            EXPECT_EQ(emit.request_id(), input.request_id);
            EXPECT_FALSE(emit.aborted());
            EXPECT_TRUE(emit.emit(Value("c0")));
            EXPECT_TRUE(emit.emit(Value("t0"), "talker", Value(Map{{"k", Value(1)}})));
            EXPECT_TRUE(emit.emit(Value("c1")));
            return input;
        }});
    ASSERT_TRUE(scheduler->start().has_value());
    ASSERT_TRUE(scheduler->inbox().push(request("r")));
    struct Expected {
        std::optional<std::string> target;
        std::int64_t chunk_id;
        Value chunk;
    };
    const Expected expected[] = {
        {std::nullopt, 0, Value("c0")}, {"talker", 0, Value("t0")}, {std::nullopt, 1, Value("c1")}};
    for (const auto& want : expected) {
        auto out = next_out(*scheduler);
        ASSERT_TRUE(out.has_value());
        EXPECT_EQ(out->kind, OutgoingKind::stream);
        EXPECT_EQ(out->request_id, "r");
        EXPECT_EQ(out->target, want.target);
        ASSERT_NE(out->chunk, nullptr);
        EXPECT_EQ(out->chunk->chunk_id, want.chunk_id);
        EXPECT_EQ(out->chunk->chunk, want.chunk);
    }
    auto result = next_out(*scheduler);
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->kind, OutgoingKind::result);
}

TEST(SimpleSchedulerTest, AnOutputSinkTakesChunksAndResultsInOrderInsteadOfTheOutbox) {
    auto scheduler =
        make({.compute = [](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
            EXPECT_TRUE(emit.emit(Value("c0")));
            EXPECT_TRUE(emit.emit(Value("t0"), "talker"));
            if (input.data.as_int() < 0) return fail(ErrorCode::internal, "negative");
            return input;
        }});
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<OutgoingMessage> taken;
    std::set<std::thread::id> threads;
    scheduler->set_output_sink([&](OutgoingMessage message) {
        {
            std::lock_guard lock(mutex);
            taken.push_back(std::move(message));
            threads.insert(std::this_thread::get_id());
        }
        changed.notify_all();
        return true;
    });
    ASSERT_TRUE(scheduler->start().has_value());
    ASSERT_TRUE(scheduler->inbox().push(request("ok", 1)));
    ASSERT_TRUE(scheduler->inbox().push(request("bad", -1)));
    std::unique_lock lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, kHangGuard, [&] { return taken.size() == 6; }));
    const std::pair<std::string, OutgoingKind> expected[] = {
        {"ok", OutgoingKind::stream},  {"ok", OutgoingKind::stream},  {"ok", OutgoingKind::result},
        {"bad", OutgoingKind::stream}, {"bad", OutgoingKind::stream}, {"bad", OutgoingKind::error}};
    for (std::size_t i = 0; i < taken.size(); ++i) {
        EXPECT_EQ(taken[i].request_id, expected[i].first) << i;
        EXPECT_EQ(taken[i].kind, expected[i].second) << i;
    }
    EXPECT_EQ(taken[1].target, std::optional<std::string>("talker"));
    EXPECT_EQ(taken[5].error.message, "negative");
    EXPECT_EQ(threads.size(), 1u);  // the worker's own thread
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
    EXPECT_EQ(scheduler->outbox().size(), 0u);
    lock.unlock();
    scheduler->stop();  // before the sink's state goes
}

TEST(SimpleSchedulerTest, BatchesHonourMaxBatchSize) {
    std::vector<std::size_t> sizes;
    auto scheduler = make({.batch_compute =
                               [&](const std::vector<BatchItem>& items) {
                                   sizes.push_back(items.size());
                                   std::vector<Result<StagePayload>> results;
                                   for (const auto& item : items) {
                                       results.push_back(doubled(*item.input, *item.emitter));
                                   }
                                   return results;
                               },
                           .max_batch_size = 4});
    // Queued before start: the worker finds them all waiting.
    for (int i = 0; i < 9; ++i)
        ASSERT_TRUE(scheduler->inbox().push(request("r" + std::to_string(i), i)));
    ASSERT_TRUE(scheduler->start().has_value());
    for (int i = 0; i < 9; ++i) {
        auto out = next_out(*scheduler);
        ASSERT_TRUE(out.has_value());
        EXPECT_EQ(out->request_id, "r" + std::to_string(i));
        EXPECT_EQ(out->result->data, Value(2 * i));
    }
    scheduler->stop();
    EXPECT_EQ(sizes, (std::vector<std::size_t>{4, 4, 1}));
}

TEST(SimpleSchedulerTest, BatchWaitCollectsItemsThatArriveLater) {
    std::promise<std::size_t> batch_size;
    auto scheduler =
        make({.batch_compute =
                  [&](const std::vector<BatchItem>& items) {
                      batch_size.set_value(items.size());
                      std::vector<Result<StagePayload>> results;
                      for (const auto& item : items) results.push_back(*item.input);
                      return results;
                  },
              .max_batch_size = 3,
              .max_batch_wait = std::chrono::duration_cast<std::chrono::microseconds>(kHangGuard)});
    ASSERT_TRUE(scheduler->start().has_value());
    for (int i = 0; i < 3; ++i)
        ASSERT_TRUE(scheduler->inbox().push(request("r" + std::to_string(i))));
    auto size = batch_size.get_future();
    ASSERT_EQ(size.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(size.get(), 3u);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(next_out(*scheduler).has_value());
}

TEST(SimpleSchedulerTest, BatchWithTheWrongResultCountFailsEveryItem) {
    auto scheduler =
        make({.batch_compute =
                  [](const std::vector<BatchItem>&) { return std::vector<Result<StagePayload>>{}; },
              .max_batch_size = 2});
    ASSERT_TRUE(scheduler->inbox().push(request("a")));
    ASSERT_TRUE(scheduler->inbox().push(request("b")));
    ASSERT_TRUE(scheduler->start().has_value());
    for (const char* id : {"a", "b"}) {
        auto out = next_out(*scheduler);
        ASSERT_TRUE(out.has_value());
        EXPECT_EQ(out->request_id, id);
        EXPECT_EQ(out->kind, OutgoingKind::error);
        EXPECT_EQ(out->error.code, ErrorCode::internal);
    }
}

TEST(SimpleSchedulerTest, AbortRemovesQueuedWork) {
    Gate release;
    std::promise<void> started;
    auto scheduler =
        make({.compute = [&](const StagePayload& input, Emitter&) -> Result<StagePayload> {
            if (input.request_id == "r1") {
                started.set_value();
                release.wait();
            }
            return input;
        }});
    ASSERT_TRUE(scheduler->start().has_value());
    for (const char* id : {"r1", "r2", "r3"}) ASSERT_TRUE(scheduler->inbox().push(request(id)));
    ASSERT_EQ(started.get_future().wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(scheduler->active_requests(), 3u);  // one running, two queued
    scheduler->abort("r2");
    scheduler->abort("r2");       // idempotent
    scheduler->abort("unknown");  // ignored
    EXPECT_EQ(scheduler->active_requests(), 2u);
    release.open();
    auto first = next_out(*scheduler);
    auto second = next_out(*scheduler);
    ASSERT_TRUE(first.has_value() && second.has_value());
    EXPECT_EQ(first->request_id, "r1");
    EXPECT_EQ(second->request_id, "r3");
    EXPECT_EQ(scheduler->active_requests(), 0u);
    scheduler->stop();
    EXPECT_EQ(scheduler->outbox().pop(), std::nullopt);  // nothing of r2
}

TEST(SimpleSchedulerTest, AbortOfRunningWorkWakesItAndDropsItsOutput) {
    std::promise<void> started;
    std::promise<bool> emit_after_abort;
    auto scheduler =
        make({.compute = [&](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
            if (input.request_id != "long") return input;
            EXPECT_TRUE(emit.emit(Value("before abort")));
            started.set_value();
            EXPECT_TRUE(emit.wait_for_abort(kHangGuard));  // woken by the abort, not the timeout
            EXPECT_TRUE(emit.aborted());
            emit_after_abort.set_value(emit.emit(Value("after abort")));
            return input;  // dropped
        }});
    ASSERT_TRUE(scheduler->start().has_value());
    ASSERT_TRUE(scheduler->inbox().push(request("long")));
    ASSERT_EQ(started.get_future().wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(scheduler->active_requests(), 1u);
    scheduler->abort("long");
    EXPECT_FALSE(emit_after_abort.get_future().get());
    ASSERT_TRUE(scheduler->inbox().push(request("next")));

    auto chunk = next_out(*scheduler);  // emitted before the abort
    ASSERT_TRUE(chunk.has_value());
    EXPECT_EQ(chunk->kind, OutgoingKind::stream);
    auto next = next_out(*scheduler);
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->request_id, "next");  // no result of "long"
    EXPECT_EQ(scheduler->active_requests(), 0u);
}

TEST(SimpleSchedulerTest, WithoutInlineWhenIdleNothingRunsOnTheCallersThread) {
    auto scheduler = make({.compute = doubled});
    ASSERT_TRUE(scheduler->start().has_value());
    IncomingMessage message = request("r", 4);
    EXPECT_FALSE(scheduler->try_run_here(message));
    EXPECT_NE(message.payload, nullptr);  // untouched, for the inbox
}

TEST(SimpleSchedulerTest, InlineWhenIdleComputesOnTheCallersThreadOnlyWhileIdle) {
    const std::size_t threads_before = thread_count();
    std::mutex mutex;
    std::map<std::string, std::thread::id> computed_on;
    Gate release_busy;
    std::promise<void> busy_started;
    auto scheduler =
        make({.compute = [&](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
                  {
                      std::lock_guard lock(mutex);
                      computed_on[input.request_id] = std::this_thread::get_id();
                  }
                  if (input.request_id == "busy") {
                      busy_started.set_value();
                      EXPECT_TRUE(release_busy.wait());
                  }
                  return doubled(input, emit);
              },
              .inline_when_idle = true});
    IncomingMessage early = request("early", 1);
    EXPECT_FALSE(scheduler->try_run_here(early));  // not started
    ASSERT_TRUE(scheduler->start().has_value());

    IncomingMessage idle = request("idle", 3);
    ASSERT_TRUE(scheduler->try_run_here(idle));  // computed before it returns
    auto out = scheduler->outbox().try_pop();
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "idle");
    EXPECT_EQ(out->result->data, Value(6));
    EXPECT_EQ(computed_on.at("idle"), std::this_thread::get_id());

    // A result waiting in the outbox makes the scheduler busy.
    IncomingMessage first = request("first", 1);
    ASSERT_TRUE(scheduler->try_run_here(first));
    IncomingMessage second = request("second", 2);
    EXPECT_FALSE(scheduler->try_run_here(second));
    ASSERT_TRUE(next_out(*scheduler).has_value());

    // So does work running on a worker: the message goes to the inbox instead.
    ASSERT_TRUE(scheduler->inbox().push(request("busy", 5)));
    ASSERT_EQ(busy_started.get_future().wait_for(kHangGuard), std::future_status::ready);
    IncomingMessage queued = request("queued", 7);
    EXPECT_FALSE(scheduler->try_run_here(queued));
    ASSERT_TRUE(scheduler->inbox().push(std::move(queued)));
    release_busy.open();
    std::set<std::string> ids;
    for (int i = 0; i < 2; ++i) {
        auto result = next_out(*scheduler);
        ASSERT_TRUE(result.has_value());
        ids.insert(result->request_id);
    }
    EXPECT_EQ(ids, (std::set<std::string>{"busy", "queued"}));
    EXPECT_NE(computed_on.at("busy"), std::this_thread::get_id());
    EXPECT_NE(computed_on.at("queued"), std::this_thread::get_id());

    // Stream messages are never taken.
    IncomingMessage chunk{.request_id = "c", .kind = IncomingKind::stream_chunk};
    EXPECT_FALSE(scheduler->try_run_here(chunk));
    EXPECT_EQ(scheduler->active_requests(), 0u);
    scheduler->stop();
    IncomingMessage late = request("late", 1);
    EXPECT_FALSE(scheduler->try_run_here(late));  // stopped
    EXPECT_TRUE(threads_back_to(threads_before));
}

// One worker and an inline computation never compute at the same time: the worker waits for
// the compute permit the inline computation holds.
TEST(SimpleSchedulerTest, InlineComputeNeverAddsToTheWorkersConcurrency) {
    std::mutex mutex;
    int computing = 0;
    int most = 0;
    Gate release;
    std::promise<void> inline_started;
    auto scheduler =
        make({.compute = [&](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
                  {
                      std::lock_guard lock(mutex);
                      most = std::max(most, ++computing);
                  }
                  if (input.request_id == "inline") {
                      inline_started.set_value();
                      EXPECT_TRUE(release.wait());
                  }
                  {
                      std::lock_guard lock(mutex);
                      --computing;
                  }
                  return doubled(input, emit);
              },
              .inline_when_idle = true});
    ASSERT_TRUE(scheduler->start().has_value());
    auto ran = std::async(std::launch::async, [&] {
        IncomingMessage message = request("inline", 1);
        return scheduler->try_run_here(message);
    });
    ASSERT_EQ(inline_started.get_future().wait_for(kHangGuard), std::future_status::ready);
    ASSERT_TRUE(scheduler->inbox().push(request("queued", 2)));
    release.open();
    EXPECT_TRUE(ran.get());
    std::set<std::string> ids;
    for (int i = 0; i < 2; ++i) {
        auto out = next_out(*scheduler);
        ASSERT_TRUE(out.has_value());
        ids.insert(out->request_id);
    }
    EXPECT_EQ(ids, (std::set<std::string>{"inline", "queued"}));
    EXPECT_EQ(most, 1);
}

TEST(SimpleSchedulerTest, InlineComputeHonoursAbortAndStopWaitsForIt) {
    std::promise<void> started;
    auto scheduler =
        make({.compute = [&](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
                  started.set_value();
                  EXPECT_TRUE(emit.wait_for_abort(kHangGuard));  // woken by abort, not timeout
                  return input;                                  // dropped
              },
              .inline_when_idle = true});
    ASSERT_TRUE(scheduler->start().has_value());
    auto ran = std::async(std::launch::async, [&] {
        IncomingMessage message = request("long");
        return scheduler->try_run_here(message);
    });
    ASSERT_EQ(started.get_future().wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(scheduler->active_requests(), 1u);
    scheduler->abort("long");
    ASSERT_EQ(ran.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_TRUE(ran.get());
    EXPECT_EQ(scheduler->outbox().try_pop(), std::nullopt);  // the result was dropped
    EXPECT_EQ(scheduler->active_requests(), 0u);

    // stop() returns only after a computation running on another thread has ended.
    std::promise<void> second_started;
    std::atomic<bool> compute_returned{false};
    auto blocking =
        make({.compute = [&](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
                  second_started.set_value();
                  EXPECT_TRUE(emit.wait_for_abort(kHangGuard));  // stop wakes it
                  compute_returned.store(true);
                  return input;
              },
              .inline_when_idle = true});
    ASSERT_TRUE(blocking->start().has_value());
    auto running = std::async(std::launch::async, [&] {
        IncomingMessage message = request("r");
        return blocking->try_run_here(message);
    });
    ASSERT_EQ(second_started.get_future().wait_for(kHangGuard), std::future_status::ready);
    blocking->stop();
    EXPECT_TRUE(compute_returned.load());
    EXPECT_TRUE(running.get());
    EXPECT_EQ(blocking->outbox().pop(), std::nullopt);  // closed, nothing delivered
}

TEST(SimpleSchedulerTest, MessagesForAnAbortedRequestArrivingLaterAreDropped) {
    auto scheduler = make({.compute = doubled});
    ASSERT_TRUE(scheduler->start().has_value());
    scheduler->abort("late");
    ASSERT_TRUE(scheduler->inbox().push(request("late", 1)));
    ASSERT_TRUE(scheduler->inbox().push(request("other", 2)));
    auto out = next_out(*scheduler);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "other");
    EXPECT_EQ(scheduler->active_requests(), 0u);
}

TEST(SimpleSchedulerTest, StreamMessagesAndMissingPayloadsAreDropped) {
    auto scheduler = make({.compute = doubled});
    ASSERT_TRUE(scheduler->start().has_value());
    ASSERT_TRUE(
        scheduler->inbox().push(IncomingMessage{.request_id = "s",
                                                .kind = IncomingKind::stream_chunk,
                                                .chunk = std::make_shared<const StreamChunk>(),
                                                .from_stage = "up"}));
    ASSERT_TRUE(scheduler->inbox().push(
        IncomingMessage{.request_id = "s", .kind = IncomingKind::stream_done, .from_stage = "up"}));
    ASSERT_TRUE(scheduler->inbox().push(IncomingMessage{.request_id = "nopayload"}));
    ASSERT_TRUE(scheduler->inbox().push(request("r", 5)));
    auto out = next_out(*scheduler);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->request_id, "r");
    EXPECT_EQ(out->result->data, Value(10));
}

TEST(SimpleSchedulerTest, StopWithWorkQueuedAndRunningDoesNotHang) {
    const std::size_t threads_before = thread_count();
    std::promise<void> started;
    auto scheduler =
        make({.compute = [&](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
                  if (input.request_id == "r0") {
                      started.set_value();
                      EXPECT_TRUE(emit.wait_for_abort(kHangGuard));  // woken by stop
                  }
                  return input;
              },
              .worker_threads = 2});
    ASSERT_TRUE(scheduler->start().has_value());
    for (int i = 0; i < 20; ++i)
        ASSERT_TRUE(scheduler->inbox().push(request("r" + std::to_string(i))));
    ASSERT_EQ(started.get_future().wait_for(kHangGuard), std::future_status::ready);
    std::promise<void> stop_returned;
    std::thread stopper([&] {
        scheduler->stop();
        stop_returned.set_value();
    });
    // Drain like a Stage does until the outbox closes.
    std::size_t results = 0;
    while (auto out = next_out(*scheduler)) ++results;
    const bool stopped =
        stop_returned.get_future().wait_for(kHangGuard) == std::future_status::ready;
    stopper.join();
    ASSERT_TRUE(stopped);
    EXPECT_LT(results, 20u);
    EXPECT_TRUE(scheduler->inbox().closed());
    EXPECT_FALSE(scheduler->inbox().push(request("after stop")));
    scheduler->stop();  // idempotent
    EXPECT_TRUE(threads_back_to(threads_before));
}

TEST(SimpleSchedulerTest, StopWithoutStartAndDestructionAreSafe) {
    auto scheduler = make({.compute = doubled});
    scheduler->stop();
    EXPECT_TRUE(scheduler->outbox().closed());
    EXPECT_FALSE(scheduler->start().has_value());
    auto started = make({.compute = doubled});
    ASSERT_TRUE(started->start().has_value());
    ASSERT_TRUE(started->inbox().push(request("r", 1)));
    started.reset();  // the destructor stops
}

TEST(SimpleSchedulerTest, SeveralWorkersProduceEveryResult) {
    auto scheduler = make({.compute = doubled, .worker_threads = 4});
    ASSERT_TRUE(scheduler->start().has_value());
    for (int i = 0; i < 200; ++i)
        ASSERT_TRUE(scheduler->inbox().push(request("r" + std::to_string(i), i)));
    std::set<std::string> seen;
    for (int i = 0; i < 200; ++i) {
        auto out = next_out(*scheduler);
        ASSERT_TRUE(out.has_value());
        ASSERT_EQ(out->kind, OutgoingKind::result);
        EXPECT_EQ(out->result->data, Value(2 * std::stoi(out->request_id.substr(1))));
        seen.insert(out->request_id);
    }
    EXPECT_EQ(seen.size(), 200u);
    EXPECT_EQ(scheduler->active_requests(), 0u);
}

TEST(SimpleSchedulerTest, RecordsQueueWaitAndComputeSpans) {
    std::string pattern = (fs::path(::testing::TempDir()) / "omnirt-sched-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    Tracer tracer("enc");
    tracer.start(pattern + "/trace.json");
    auto scheduler = make({.compute = doubled, .tracer = &tracer});
    ASSERT_TRUE(scheduler->start().has_value());
    ASSERT_TRUE(scheduler->inbox().push(request("a", 1)));
    ASSERT_TRUE(scheduler->inbox().push(request("b", 2)));
    ASSERT_TRUE(next_out(*scheduler).has_value());
    ASSERT_TRUE(next_out(*scheduler).has_value());
    scheduler->stop();  // the compute spans end before the results leave
    auto path = tracer.stop();
    ASSERT_TRUE(path.has_value());
    std::ifstream in(*path);
    std::stringstream text;
    text << in.rdbuf();
    const auto events = nlohmann::json::parse(text.str())["traceEvents"];
    std::multiset<std::string> spans;
    for (const auto& event : events) {
        spans.insert(event["name"].get<std::string>() + ":" +
                     event["args"]["request_id"].get<std::string>());
    }
    EXPECT_EQ(spans, (std::multiset<std::string>{"queue_wait:a", "compute:a", "queue_wait:b",
                                                 "compute:b"}));
    fs::remove_all(pattern);
}

TEST(RecentRequestIdsTest, ForgetsTheOldestBeyondCapacity) {
    RecentRequestIds ids(2);
    ids.insert("a");
    ids.insert("b");
    ids.insert("a");  // already there: no reordering, no growth
    EXPECT_EQ(ids.size(), 2u);
    ids.insert("c");
    EXPECT_FALSE(ids.contains("a"));
    EXPECT_TRUE(ids.contains("b"));
    EXPECT_TRUE(ids.contains("c"));
}

TEST(RecentRequestIdsTest, AnErasedIdComesBackAsTheNewest) {
    RecentRequestIds ids(3);
    for (const char* id : {"a", "b", "c", "d"}) ids.insert(id);
    EXPECT_FALSE(ids.contains("a"));
    ids.erase("c");
    ids.erase("zzz");
    EXPECT_EQ(ids.size(), 2u);
    ids.insert("e");
    ids.insert("c");  // re-inserted: now the newest
    EXPECT_FALSE(ids.contains("b"));
    EXPECT_TRUE(ids.contains("c") && ids.contains("d") && ids.contains("e"));
    for (int i = 0; i < 1000; ++i) ids.insert("x" + std::to_string(i));
    EXPECT_EQ(ids.size(), 3u);
    EXPECT_TRUE(ids.contains("x999"));
}

}  // namespace
}  // namespace omnirt::pipeline

#pragma once
// SimpleScheduler: the scheduler of non-AR stages (pipeline.md): inbox.get() -> compute
// function -> outbox.put(result or error), with optional local batching. Also the Emitter that
// compute functions (and the StreamingScheduler's handlers) use to stream chunks and to notice
// aborts.
//
// Threads: `worker_threads` workers pop the inbox and run the compute function; with more than
// one worker, results of different requests may leave out of arrival order. abort() and
// active_requests() may be called from any thread. The Stage owns the scheduler (scheduler.h).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "pipeline/scheduler.h"

namespace omnirt::pipeline {

class Tracer;

// Handed to a compute function for one request. Valid only during the call; used by the thread
// that runs the call.
class Emitter {
  public:
    virtual ~Emitter() = default;

    [[nodiscard]] virtual const std::string& request_id() const = 0;
    // Puts one stream chunk into the outbox: to `target` (a stage of stream_to) or, with
    // nullopt, to the client. chunk_id counts from 0 per request and target. Blocks while the
    // outbox is full. False (chunk dropped) once the request is aborted or the scheduler stops;
    // a long computation should then return early.
    virtual bool emit(Value chunk, std::optional<std::string> target = std::nullopt,
                      Value metadata = {}) = 0;
    // True once the request was aborted or the scheduler is stopping.
    [[nodiscard]] virtual bool aborted() const = 0;
    // Waits up to `timeout` and returns early when the request is aborted or the scheduler stops.
    // True when it returned because of an abort or stop.
    virtual bool wait_for_abort(std::chrono::milliseconds timeout) = 0;
};

// Ids of requests that left a scheduler (aborted or finished), so that messages arriving late
// for them are dropped instead of starting new work. Bounded: the oldest ids are forgotten.
// Not thread-safe (the owner locks).
class RecentRequestIds {
  public:
    explicit RecentRequestIds(std::size_t capacity = 4096) : capacity_(capacity) {}
    void insert(const std::string& request_id);
    void erase(const std::string& request_id);  // linear in the capacity
    [[nodiscard]] bool contains(const std::string& request_id) const;
    [[nodiscard]] std::size_t size() const { return ids_.size(); }

  private:
    std::size_t capacity_;
    std::set<std::string, std::less<>> ids_;
    std::deque<std::string> order_;
};

// One item of a batch: the input and the emitter of its request.
struct BatchItem {
    std::shared_ptr<const StagePayload> input;
    Emitter* emitter = nullptr;
};

using ComputeFn = std::function<Result<StagePayload>(const StagePayload& input, Emitter& emit)>;
// Must return one result per item, in the items' order; any other count fails every item.
using BatchComputeFn =
    std::function<std::vector<Result<StagePayload>>(const std::vector<BatchItem>& items)>;

struct SimpleSchedulerOptions {
    std::string stage_name;  // for logs and error messages
    // Exactly one of the two. `compute` runs one item at a time; `batch_compute` gets up to
    // max_batch_size items.
    ComputeFn compute;
    BatchComputeFn batch_compute;
    std::size_t max_batch_size = 1;
    // A worker that popped one item waits at most this long for more (up to max_batch_size);
    // zero takes only what is already queued.
    std::chrono::microseconds max_batch_wait{0};
    std::size_t worker_threads = 1;
    // A new request that reaches an idle scheduler (nothing queued, running or waiting in the
    // outbox) is computed on the thread that delivers it, often the stage's control IO thread,
    // instead of waking a worker: two thread hand-offs less per request (the worker's wake-up
    // and the IO thread's for the result). Only for compute functions of microseconds that emit
    // few chunks: while one runs there, the stage handles no other control message. A busy
    // scheduler queues as usual. Needs max_batch_size 1. Results of different requests may then
    // leave out of arrival order.
    bool inline_when_idle = false;
    std::size_t inbox_capacity = kDefaultQueueCapacity;
    std::size_t outbox_capacity = kDefaultQueueCapacity;
    // Spans "queue_wait" and "compute"; may be null (no tracing). Must outlive the scheduler.
    Tracer* tracer = nullptr;
};

class SimpleScheduler final : public Scheduler {
  public:
    // invalid_argument when neither or both compute functions are set, when max_batch_size or
    // worker_threads is 0, or when max_batch_size > 1 without batch_compute.
    [[nodiscard]] static Result<std::unique_ptr<SimpleScheduler>> create(
        SimpleSchedulerOptions options);
    ~SimpleScheduler() override;  // stop()

    [[nodiscard]] Status start() override;
    // Queued work is dropped, running work sees aborted() and its results are dropped; waits for
    // the running compute calls to return.
    void stop() override;
    // Removes the request's queued items and marks its running items (their emits and results
    // are dropped; Emitter::aborted() turns true). new_request messages of the id that arrive
    // later are dropped too (the last 4096 aborted ids are remembered).
    void abort(const std::string& request_id) override;
    // With inline_when_idle, computes `message` here when the scheduler is idle (see above).
    [[nodiscard]] bool try_run_here(IncomingMessage& message) override;
    // Marks the scheduler stopping and wakes computations waiting in Emitter::wait_for_abort,
    // wherever they run; stop() does the rest.
    void begin_stop() override;
    // Queued items (inbox) + running items.
    [[nodiscard]] std::size_t active_requests() const override;

  private:
    struct Job;
    class JobEmitter;

    explicit SimpleScheduler(SimpleSchedulerOptions options);
    void worker_loop();
    // Collects up to max_batch_size new_request messages, starting with `first`.
    std::vector<IncomingMessage> collect_batch(IncomingMessage first);
    bool accept(const IncomingMessage& message);
    void run_batch(std::vector<IncomingMessage> batch);
    void finish(const std::shared_ptr<Job>& job, Result<StagePayload> result);
    void take_permit();
    void return_permit();
    bool emit_chunk(Job& job, Value chunk, std::optional<std::string> target, Value metadata);

    SimpleSchedulerOptions options_;
    std::mutex stop_mutex_;  // serialises stop()
    mutable std::mutex mutex_;
    std::condition_variable abort_cv_;  // wakes wait_for_abort on abort and stop
    std::unordered_multimap<std::string, std::shared_ptr<Job>> running_;
    RecentRequestIds aborted_;
    bool started_ = false;
    bool stopping_ = false;
    // Compute permits, worker_threads of them: a worker takes one (waiting) before it computes,
    // try_run_here only when one is free, so that an inline computation never adds to the
    // worker_threads computations the compute function may see at once. stop() waits until
    // every permit is back. Guarded by mutex_; permit_cv_ signals a returned permit.
    std::size_t free_permits_ = 0;
    std::condition_variable permit_cv_;
    std::vector<std::thread> workers_;
};

}  // namespace omnirt::pipeline

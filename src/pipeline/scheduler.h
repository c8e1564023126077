#pragma once
// The scheduler interface of pipeline.md. A Stage (the IO shell) pushes executable work into
// the scheduler's inbox and drains its outbox; it never branches on the scheduler's type. The
// SimpleScheduler (non-AR stages), the StreamingScheduler (Code2Wav shape) and the engine's AR
// scheduler (engine/ar_scheduler.h) all present this surface.
//
// Ownership and threads:
//  * the Stage owns the Scheduler; it is the only producer of the inbox and the only consumer of
//    the outbox;
//  * start() launches the scheduler's own threads; stop() closes the inbox, joins them and then
//    closes the outbox (so the Stage's drain loop ends after the last message);
//  * abort() may be called from any thread: queued work of the request is removed and results of
//    running work are dropped instead of reaching the outbox;
//  * outputs go through deliver(): into the outbox, or, when the Stage installed an output sink,
//    to the sink, which may handle a cheap output on the producing thread (one thread hand-off
//    less per message) and pushes the rest into the outbox itself. A scheduler that pushes into
//    outbox_ directly still works; its outputs always take the Stage's output thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "pipeline/queue.h"

namespace omnirt::pipeline {

class Tracer;

using Clock = std::chrono::steady_clock;

// One streamed chunk between stages (hidden states, codec codes) or to the client.
struct StreamChunk {
    std::int64_t chunk_id = 0;  // per request and sender, from 0
    Value chunk;
    Value metadata;
};

enum class IncomingKind : std::uint8_t { new_request, stream_chunk, stream_done };

struct IncomingMessage {
    std::string request_id;
    IncomingKind kind = IncomingKind::new_request;
    std::shared_ptr<const StagePayload> payload;   // new_request: the (merged) input payload
    std::shared_ptr<const StreamChunk> chunk;      // stream_chunk
    std::string from_stage;                        // stream_chunk / stream_done: the sender
    Clock::time_point enqueued_at = Clock::now();  // for the profiler's queue-wait span
};

enum class OutgoingKind : std::uint8_t { result, stream, error };

struct OutgoingMessage {
    std::string request_id;
    OutgoingKind kind = OutgoingKind::result;
    // result: the stage's output payload; the Stage routes it (next / route_fn / terminal).
    std::shared_ptr<const StagePayload> result;
    // stream: one chunk. `target` names a stage of the stage's stream_to; nullopt sends the
    // chunk to the client through the coordinator (a StreamMessage).
    std::shared_ptr<const StreamChunk> chunk;
    std::optional<std::string> target;
    // error: the request fails with this error (the coordinator aborts it everywhere).
    Error error;
};

inline constexpr std::size_t kDefaultQueueCapacity = 4096;

// What a scheduler reports in its stage's heartbeats (metrics). Zeros where it does not apply.
struct SchedulerLoad {
    // KV cache blocks held by requests (a block shared by several counts for each), whatever
    // the prefix cache keeps: 0 once no request holds any (what leak checks look at).
    std::int64_t kv_blocks_used = 0;
    std::int64_t kv_blocks_total = 0;
    std::int64_t paused_requests = 0;   // requests held by a pause
    std::int64_t generated_tokens = 0;  // tokens generated since start
};

class Scheduler {
  public:
    // Takes one output; false (the message dropped) when the outbox is closed. Called on the
    // scheduler's threads; may block like outbox().push().
    using OutputSink = std::function<bool(OutgoingMessage message)>;

    explicit Scheduler(std::size_t inbox_capacity = kDefaultQueueCapacity,
                       std::size_t outbox_capacity = kDefaultQueueCapacity)
        : inbox_(inbox_capacity), outbox_(outbox_capacity) {}
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;
    virtual ~Scheduler() = default;

    [[nodiscard]] BlockingQueue<IncomingMessage>& inbox() { return inbox_; }
    [[nodiscard]] BlockingQueue<OutgoingMessage>& outbox() { return outbox_; }

    // Installed by the Stage before start(); never changed afterwards.
    void set_output_sink(OutputSink sink) { output_sink_ = std::move(sink); }

    [[nodiscard]] virtual Status start() = 0;
    // Idempotent. Closes the inbox, joins the scheduler's threads, then closes the outbox.
    virtual void stop() = 0;
    // Thread-safe; idempotent; unknown ids are ignored.
    virtual void abort(const std::string& request_id) = 0;
    // Flow control (proto::PauseMessage, for a client that reads slower than the request is
    // produced): `paused` holds the request (its state stays, nothing more is produced for it),
    // false lets it go on. Thread-safe, idempotent; an id not known yet is remembered (bounded,
    // PausedRequests), an abort ends a pause. Default: not supported, ignored (a scheduler that
    // computes one result per request has nothing to hold back).
    virtual void pause(const std::string& request_id, bool paused) {
        (void)request_id;
        (void)paused;
    }
    // Called by the Stage before it queues `message`: a scheduler that may run it on the calling
    // thread (no hand-off to a worker) does so and returns true; else false, and the Stage
    // pushes it into the inbox. Default: false.
    [[nodiscard]] virtual bool try_run_here(IncomingMessage& message) {
        (void)message;
        return false;
    }
    // Called by the Stage first when it stops, before it waits for its own threads (one may be
    // inside try_run_here): a scheduler lets its running computations notice the stop. Must not
    // block. Default: nothing.
    virtual void begin_stop() {}
    // Requests the scheduler holds state for (queued, running or, for streaming schedulers,
    // open streams). For health reports and leak checks.
    [[nodiscard]] virtual std::size_t active_requests() const = 0;
    // For heartbeats and metrics. Thread-safe. Default: zeros.
    [[nodiscard]] virtual SchedulerLoad load() const { return {}; }

    // Time spent in compute since start (what ComputeTimer measured). Thread-safe; for metrics.
    [[nodiscard]] std::chrono::nanoseconds compute_time() const {
        return std::chrono::nanoseconds(compute_ns_.load(std::memory_order_relaxed));
    }

  protected:
    // Adds the time of its scope to compute_time(): schedulers put one around every compute
    // (or handler) call.
    class ComputeTimer {
      public:
        explicit ComputeTimer(Scheduler& scheduler) : scheduler_(scheduler), start_(Clock::now()) {}
        ~ComputeTimer() {
            scheduler_.compute_ns_.fetch_add(
                std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count(),
                std::memory_order_relaxed);
        }
        ComputeTimer(const ComputeTimer&) = delete;
        ComputeTimer& operator=(const ComputeTimer&) = delete;

      private:
        Scheduler& scheduler_;
        Clock::time_point start_;
    };

    // Hands one output to the Stage: the output sink when one is installed, else the outbox.
    // Blocks while the outbox is full; false (message dropped) once it is closed.
    bool deliver(OutgoingMessage message) {
        if (output_sink_) return output_sink_(std::move(message));
        return outbox_.push(std::move(message));
    }

    std::atomic<std::int64_t> compute_ns_{0};
    BlockingQueue<IncomingMessage> inbox_;
    BlockingQueue<OutgoingMessage> outbox_;

  private:
    OutputSink output_sink_;
};

}  // namespace omnirt::pipeline

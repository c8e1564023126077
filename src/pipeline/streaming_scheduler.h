#pragma once
// StreamingScheduler: the scheduler of stream-consuming stages (the Code2Wav shape of
// pipeline.md). It keeps one state per request:
//  * the state is created by the FIRST message of a request of any kind: stream chunks may
//    arrive before the request's payload; every message is handed to the handler at once, in
//    arrival order (on_chunk may run before on_new_request);
//  * the request finishes when its payload arrived AND every stream source that sent something
//    for it has sent stream_done (with `require_stream_done`, at least one stream_done is needed
//    when the stage has stream sources). on_done then flushes and returns the final payload,
//    which leaves as OutgoingKind::result, and the state is freed;
//  * a handler error leaves as OutgoingKind::error and frees the state; abort() frees it too.
// Messages for a request that already left (finished, failed or aborted) are dropped.
//
// Pause (Scheduler::pause, a slow client): the messages of a paused request are kept, in order,
// instead of handed to the handler, and it takes no part in on_step; its resume replays them.
// So the stage emits nothing more for it while its upstream stages hold it too.
//
// Threads: one worker runs every handler call, so the chunks of a request stay in order and
// handlers need no locking. abort() and active_requests() may be called from any thread.
//
// Batching across requests (optional on_step): a handler that wants to do the work of several
// requests in one computation leaves it in its per-request state and sets state.pending in
// on_chunk or on_new_request. Whenever the inbox is empty and some open
// request is pending, the worker calls on_step once with every pending request (oldest pending
// first); on_step does one round of work, clears `pending` of the requests it has finished
// with and sets `status` of those that failed (each fails alone). A request that is ready to
// finish is made pending too (item.finishing set), so its flush can be batched with the others;
// on_done runs once a step has cleared `pending`. Messages that arrive meanwhile are handled
// between steps, so a request that becomes ready joins the next step.
#include <any>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "pipeline/paused_requests.h"
#include "pipeline/scheduler.h"
#include "pipeline/simple_scheduler.h"

namespace omnirt::pipeline {

class Tracer;

// What the scheduler knows of one open request; handed to every handler call.
struct StreamRequestState {
    std::string request_id;
    std::shared_ptr<const StagePayload> payload;  // null until new_request arrived
    std::int64_t chunks_received = 0;
    std::set<std::string> sources;       // stages that sent a chunk or a done signal
    std::set<std::string> done_sources;  // stages that sent stream_done
    std::any user;                       // the handler's own per-request state
    bool pending = false;                // set by the handler: on_step has work for it
};

// One pending request handed to on_step.
struct StreamStepItem {
    StreamRequestState* state = nullptr;
    Emitter* emit = nullptr;
    // The payload arrived and every stream is done: on_done follows once `pending` is cleared,
    // so on_step may already flush what is left.
    bool finishing = false;
    Status status;  // set by on_step: an error fails this request only
};

// The handler's callbacks; each returns an error to fail the request. Run on the worker thread.
struct StreamingHandler {
    // Optional. The request's payload arrived (once per request, before or after chunks).
    std::function<Status(StreamRequestState& state, Emitter& emit)> on_new_request;
    // Required. One chunk from `from_stage`; may emit stream chunks.
    std::function<Status(StreamRequestState& state, const std::string& from_stage,
                         const StreamChunk& chunk, Emitter& emit)>
        on_chunk;
    // Required. Payload present and streams done: flush, and return the stage's result.
    std::function<Result<StagePayload>(StreamRequestState& state, Emitter& emit)> on_done;
    // Optional. One round of batched work over the pending requests (see the header comment);
    // never called with an empty list.
    std::function<void(std::vector<StreamStepItem>& items)> on_step;
};

struct StreamingSchedulerOptions {
    std::string stage_name;                   // for logs and error messages
    std::vector<std::string> stream_sources;  // StageContext::stream_sources
    StreamingHandler handler;
    // With stream sources, a request finishes only after at least one stream_done arrived.
    bool require_stream_done = true;
    std::size_t inbox_capacity = kDefaultQueueCapacity;
    std::size_t outbox_capacity = kDefaultQueueCapacity;
    Tracer* tracer = nullptr;  // "queue_wait" and "compute" spans; may be null
};

class StreamingScheduler final : public Scheduler {
  public:
    // invalid_argument without on_chunk or on_done.
    [[nodiscard]] static Result<std::unique_ptr<StreamingScheduler>> create(
        StreamingSchedulerOptions options);
    ~StreamingScheduler() override;  // stop()

    [[nodiscard]] Status start() override;
    // Queued messages are dropped and open states freed without a result.
    void stop() override;
    void abort(const std::string& request_id) override;
    void pause(const std::string& request_id, bool paused) override;
    // Open request states.
    [[nodiscard]] std::size_t active_requests() const override;
    [[nodiscard]] SchedulerLoad load() const override;

  private:
    struct Entry;
    class EntryEmitter;

    explicit StreamingScheduler(StreamingSchedulerOptions options);
    void worker_loop();
    // Hands `message` to the handler, or keeps it while its request is paused.
    void handle(IncomingMessage message);
    void process(const std::shared_ptr<Entry>& entry, IncomingMessage message);
    // Replays the kept messages of the requests that were resumed.
    void release_resumed();
    [[nodiscard]] bool has_runnable_pending() const;
    // Calls on_step with the pending requests, then fails or finishes them as they ask.
    void run_step();
    void finish(const std::shared_ptr<Entry>& entry, Emitter& emitter);
    [[nodiscard]] bool ready_to_finish(const StreamRequestState& state) const;
    // Frees the state; delivers `out` unless the request was aborted meanwhile.
    void leave(const std::shared_ptr<Entry>& entry, std::optional<OutgoingMessage> out);
    bool emit_chunk(Entry& entry, Value chunk, std::optional<std::string> target, Value metadata);

    StreamingSchedulerOptions options_;
    std::mutex stop_mutex_;  // serialises stop()
    mutable std::mutex mutex_;
    std::condition_variable abort_cv_;  // wakes Emitter::wait_for_abort on abort and stop
    std::map<std::string, std::shared_ptr<Entry>, std::less<>> states_;
    RecentRequestIds finished_;  // finished, failed or aborted
    bool started_ = false;
    bool stopping_ = false;
    std::thread worker_;
    std::vector<std::shared_ptr<Entry>> pending_;  // worker thread only; oldest first
    std::vector<std::shared_ptr<Entry>> holding_;  // worker thread only: with kept messages
    PausedRequests paused_;                        // thread-safe itself
};

}  // namespace omnirt::pipeline

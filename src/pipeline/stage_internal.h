#pragma once
// Private state of a Stage (stage.h), shared by the files that implement it:
//   stage.cpp         create / start / stop / stats, local-dispatch entry points, request book
//   stage_input.cpp   the stage thread: control events, relay reads, fan-in, inbox pushes
//   stage_output.cpp  the output thread (outbox -> routing and writes) and the put waiter
//
// Threads and what they own:
//   * control-plane IO thread and local senders: hand events over through deliver_event();
//   * stage thread: queued events (relay gets, fan-in, inbox pushes, aborts), fan-in timeouts,
//     heartbeats;
//   * output thread: queued outputs of the scheduler (relay puts, data_ready / complete / stream
//     sends);
//   * put waiter: waits for puts in FIFO order, then runs the request's relay cleanup.
// `book` (under book_mutex) is the per-request state every thread consults.
//
// Same-thread fast paths while the stage is idle (its scheduler's inbox is empty; a busy stage
// keeps its threads working in parallel), one thread hand-off less each (pipeline.md, "Stage
// threads"):
//   * an event that needs no blocking work (a submit, a data_ready without relay data, an abort,
//     a same-process payload, chunk or signal) is handled by the thread that delivers it when
//     the stage does not aggregate, nothing is queued before it and the stage thread is idle;
//   * an output that moves no tensor data (a result or chunk without tensor bytes, one for a
//     same-process target, an error) is handled by the scheduler thread that emits it when
//     nothing is queued before it and the output thread is idle.
// Whoever handles an event holds `input_mutex`; whoever handles an output holds
// `output_mutex`. The stage and output threads pop only while holding their mutex, so "queue
// empty" under the mutex means that nothing is queued or half-handled: events and outputs of
// one producer keep their order whichever thread handles them.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "control/control_plane.h"
#include "core/registry.h"
#include "pipeline/input_handler.h"
#include "pipeline/queue.h"
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage.h"
#include "pipeline/trace.h"
#include "proto/messages.h"
#include "relay/relay.h"

namespace omnirt::pipeline {

// How many finished and dropped request ids a stage remembers (late messages for them are
// released, not processed).
inline constexpr std::size_t kRememberedRequests = 8192;
// Events waiting for the stage thread. The IO thread blocks only when the stage thread is this
// far behind (backpressure onto ZMQ).
inline constexpr std::size_t kEventQueueCapacity = 65536;

struct LocalPayloadEvent {
    std::string from_stage;
    std::shared_ptr<const StagePayload> payload;
};
struct LocalChunkEvent {
    std::string from_stage;
    std::string request_id;
    std::shared_ptr<const StreamChunk> chunk;
};
struct LocalSignalEvent {
    std::string from_stage;
    std::string request_id;
    bool done = false;
    std::optional<std::string> error;
};
using StageEvent =
    std::variant<proto::ControlMessage, LocalPayloadEvent, LocalChunkEvent, LocalSignalEvent>;

// One put for the put waiter; a null `put` is a marker: once the earlier puts are done, run
// relay.cleanup(request_id) (the request left the stage).
struct PutWait {
    std::string request_id;
    std::string target;
    std::unique_ptr<relay::PutOperation> put;
    Clock::time_point started = Clock::now();  // for the edge's delivery time
};

// Relay traffic per target stage (heartbeats carry it to the coordinator). Thread-safe.
class EdgeTrafficTable {
  public:
    void record_write(const std::string& target, std::int64_t bytes, Clock::duration took) {
        std::lock_guard lock(mutex_);
        proto::EdgeTraffic& edge = edges_[target];
        ++edge.transfers;
        edge.bytes += bytes;
        edge.write_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
    }
    void record_delivery(const std::string& target, Clock::duration took) {
        std::lock_guard lock(mutex_);
        edges_[target].delivery_ns +=
            std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
    }
    [[nodiscard]] std::vector<proto::EdgeTraffic> snapshot() const {
        std::lock_guard lock(mutex_);
        std::vector<proto::EdgeTraffic> out;
        for (const auto& [target, edge] : edges_) {
            out.push_back(edge);
            out.back().target = target;
        }
        return out;
    }

  private:
    mutable std::mutex mutex_;
    std::map<std::string, proto::EdgeTraffic> edges_;
};

struct OutputCounters {
    std::int64_t client_chunks = 0;                 // StreamMessage.chunk_index
    std::map<std::string, std::int64_t> chunk_ids;  // per stream target
};

struct RequestBook {
    RecentRequestIds finished{kRememberedRequests};  // result routed
    RecentRequestIds dropped{kRememberedRequests};   // aborted, failed, or stream error
    std::unordered_set<std::string> active;          // work handed to the scheduler
    std::unordered_map<std::string, OutputCounters> counters;
    // The replica of each replicated target, per request (metadata.replica_routes of its
    // payload); kept until the request leaves the stage (forget_routes), not by forget().
    std::unordered_map<std::string, std::map<std::string, int>> routes;

    [[nodiscard]] bool closed(const std::string& request_id) const {
        return finished.contains(request_id) || dropped.contains(request_id);
    }
    void forget(const std::string& request_id) {
        active.erase(request_id);
        counters.erase(request_id);
    }
};

struct StageFunctions {
    std::optional<RouteFn> route;
    std::optional<StreamDoneFn> stream_done;
    std::map<std::string, ProjectionFn> projections;  // by target
};

struct Stage::State {
    using Clock = std::chrono::steady_clock;

    // --- fixed after create() ---
    StageOptions options;
    const config::StagePlan* plan = nullptr;  // points into options.plan
    std::string name;
    std::unique_ptr<Scheduler> scheduler;
    std::shared_ptr<Tracer> tracer;
    std::unique_ptr<relay::Relay> relay;
    std::unique_ptr<InputHandler> input;  // stage thread only
    StageFunctions functions;
    std::set<std::string> next;
    std::set<std::string> stream_to;
    std::map<std::string, std::string> endpoints;  // stage -> control endpoint
    // stage -> the relay rank of each replica (one entry without replicas): a put names the
    // rank, so that a tiered relay picks the tier of the replica's node.
    std::map<std::string, std::vector<std::int64_t>> ranks;
    // Replicated targets: stage -> the endpoint of each replica.
    std::map<std::string, std::vector<std::string>> replica_endpoints;
    std::string instance;         // the name in heartbeats: the stage's, or "{stage}.r{replica}"
    bool carries_routes = false;  // some stage of the plan has replicas: keep requests' routes
    Stage* self = nullptr;

    // --- set by start() ---
    std::unique_ptr<control::ControlPlane> control;

    BlockingQueue<StageEvent> events{kEventQueueCapacity};
    BlockingQueue<PutWait> puts{kDefaultQueueCapacity};

    mutable std::mutex book_mutex;
    RequestBook book;

    // Held while an event is handled (stage thread or deliver_event) and while an output is
    // handled (output thread or deliver_output). Never held across a wait for the other.
    std::mutex input_mutex;
    std::mutex output_mutex;
    // Fixed after create(): a stage that does not aggregate may handle events inline.
    bool inline_input = false;
    // Puts handed to the put waiter and not yet waited for; when zero, a request that leaves
    // the stage releases its relay state at once instead of through the put waiter.
    std::atomic<std::int64_t> puts_in_flight{0};

    std::mutex lifecycle_mutex;
    bool started = false;
    bool stopped = false;
    bool registered_local = false;
    std::thread stage_thread;
    std::thread output_thread;
    std::thread put_thread;

    std::atomic<bool> stopping{false};  // stop() began: the stage thread leaves its loop
    std::atomic<bool> shutdown_requested{false};
    std::atomic<std::int64_t> pending_fan_in{0};
    std::atomic<std::int64_t> processed{0};
    std::atomic<std::int64_t> relay_puts{0};
    std::atomic<std::int64_t> relay_gets{0};
    std::atomic<std::int64_t> local_dispatches{0};
    std::atomic<std::int64_t> dropped_messages{0};
    EdgeTrafficTable edge_traffic;

    // --- stage.cpp: shared helpers (any thread) ---
    // Reports the failure to the coordinator (once per request), drops the request in the
    // scheduler and the relay, sends stream error signals to the stream targets, and remembers
    // the id so later messages are released. Not the input handler's state: stage thread
    // callers drop that themselves.
    void fail_request(const std::string& request_id, const Error& error);
    // Aborts the request in this stage without reporting (abort message, upstream stream error).
    void drop_request(const std::string& request_id);
    [[nodiscard]] bool is_closed(const std::string& request_id) const;
    void send(const std::string& endpoint, const proto::ControlMessage& message);
    void send_to_coordinator(const proto::ControlMessage& message);
    void send_stream_signal(const std::string& target, const std::string& request_id, bool done,
                            std::optional<std::string> error);
    void send_heartbeat();
    [[nodiscard]] StageStats stats() const;
    // Where `target` is for `request_id`: its control endpoint and relay rank (its chosen
    // replica's for a replicated target), or why there is none. Replicas: remembering a
    // request's routes when its payload arrives, forgetting them when it leaves the stage.
    struct Destination {
        std::string endpoint;
        std::int64_t rank = -1;
    };
    [[nodiscard]] Result<Destination> destination_of(const std::string& target,
                                                     const std::string& request_id) const;
    void record_routes(const std::string& request_id, const StagePayload& payload);
    void forget_routes(const std::string& request_id);
    // `payload` with the request's routes in its metadata: a compute function or projection
    // that built a new request must not lose them for the stages downstream.
    [[nodiscard]] std::shared_ptr<const StagePayload> with_routes(
        std::shared_ptr<const StagePayload> payload) const;

    // --- stage_input.cpp: events (stage thread, or the delivering thread) ---
    // Any thread. Handles `event` at once when it may (see above), else queues it for the stage
    // thread (blocking while the queue is full).
    void deliver_event(StageEvent event);
    [[nodiscard]] bool can_handle_inline(const StageEvent& event) const;
    void run_stage_thread();
    void handle_event(StageEvent event);
    void on_control(proto::ControlMessage message);
    void on_data_ready(proto::DataReadyMessage message);
    void on_payload(const std::string& request_id, const std::string& from_stage,
                    std::shared_ptr<const StagePayload> payload);
    void on_stream_chunk(const std::string& request_id, const std::string& from_stage,
                         std::shared_ptr<const StreamChunk> chunk);
    void on_stream_signal(const std::string& request_id, const std::string& from_stage, bool done,
                          const std::optional<std::string>& error);
    void on_abort(const std::string& request_id);
    // A pause or resume from the coordinator (proto::PauseMessage), for the scheduler.
    void on_pause(const std::string& request_id, bool paused);
    void fail_input(const std::string& request_id, const Error& error);
    void release(const proto::DataReadyMessage& message);
    void push_to_scheduler(IncomingMessage message);
    void expire_fan_in(Clock::time_point now);

    // --- stage_output.cpp: outputs (output thread, or the scheduler thread), put waiter ---
    // The scheduler's output sink (scheduler.h): handles `message` at once when it may (see
    // above), else pushes it into the outbox.
    bool deliver_output(OutgoingMessage message);
    [[nodiscard]] bool can_handle_output_inline(const OutgoingMessage& message) const;
    [[nodiscard]] bool is_local_target(const std::string& target) const;
    void run_output_thread();
    void handle_output(OutgoingMessage message);
    void run_put_waiter();
    // Queues a real put for the put waiter (counted in puts_in_flight).
    void wait_for_put(PutWait wait);
    // relay.cleanup(request_id) once the puts queued before are done: at once when none is.
    void release_relay_state(const std::string& request_id);
    void on_result(const std::string& request_id, std::shared_ptr<const StagePayload> result);
    void on_stream_output(const std::string& request_id, std::shared_ptr<const StreamChunk> chunk,
                          const std::optional<std::string>& target);
    [[nodiscard]] bool send_payload(const std::string& target,
                                    std::shared_ptr<const StagePayload> payload);
    [[nodiscard]] Result<std::vector<std::string>> route_targets(const std::string& request_id,
                                                                 const StagePayload& result);
    [[nodiscard]] Result<std::vector<std::string>> stream_done_targets(
        const std::string& request_id, const StagePayload& result);
};

}  // namespace omnirt::pipeline

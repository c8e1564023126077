#pragma once
// Stage: the IO shell of pipeline.md. It receives control messages (submit, data_ready, abort,
// shutdown, profiler start / stop), reads full payloads and stream chunks from the relay,
// performs fan-in, pushes executable work into its scheduler's inbox, drains the outbox and turns
// results into downstream payloads (relay + data_ready, or same-process dispatch), stream chunks,
// terminal completions and errors. It never branches on the scheduler's type.
//
// Threads: the control plane's IO thread only enqueues events; a stage thread performs relay
// reads, fan-in and inbox pushes; an output thread drains the outbox, routes and writes; a put
// waiter thread waits for sends to complete (control message first, then the wait:
// communication.md, "control-before-wait"). Local-dispatch entry points may be called from any
// thread.
//
// Resource rule: every request the stage holds (pending fan-in, stream buffers, relay slots) is
// released when the request leaves the stage: result routed, error reported, abort received,
// fan-in timed out. relay.cleanup(request_id) runs on each of those paths.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/runtime_plan.h"
#include "core/error.h"
#include "core/request.h"
#include "pipeline/scheduler.h"
#include "proto/messages.h"

namespace omnirt::pipeline {

class LocalDispatcher;
class Tracer;

struct StageOptions {
    std::shared_ptr<const config::RuntimePlan> plan;
    std::string stage_name;
    // Which replica of a replicated stage this is (its process's; docs/pipeline.md "Replicas"):
    // it binds that replica's endpoint and names itself "{stage}.r{replica}" in heartbeats.
    int replica = 0;
    // Stages of the same OS process; null when the stage is alone. Must outlive the stage.
    LocalDispatcher* local = nullptr;
    // Relay transfers (put completion, get completion) fail after this.
    std::chrono::milliseconds relay_timeout{60000};
    std::chrono::milliseconds heartbeat_interval{1000};
    // Called once (on the stage's thread) when a shutdown message arrives; the host uses it to
    // stop the process. May be empty.
    std::function<void()> on_shutdown;
};

struct StageStats {
    std::int64_t active_requests = 0;  // requests with state in the stage or its scheduler
    std::int64_t pending_fan_in = 0;
    std::int64_t queue_depth = 0;  // scheduler inbox
    std::int64_t processed = 0;    // results emitted
    std::int64_t relay_puts = 0;
    std::int64_t relay_gets = 0;
    std::int64_t local_dispatches = 0;         // payloads and chunks passed by reference
    std::int64_t dropped_messages = 0;         // for finished or aborted requests, or malformed
    std::chrono::nanoseconds compute_time{0};  // the scheduler's compute since start
    std::vector<proto::EdgeTraffic> edges;     // relay traffic per target stage
};

class Stage {
  public:
    // Creates the stage's relay (shared by nothing else) and resolves its functions (route_fn,
    // merge_fn, wait_for_fn, projections, stream_done_to_fn). `scheduler` comes from the stage's
    // factory; `tracer` outlives the stage (the factory got the same pointer).
    [[nodiscard]] static Result<std::unique_ptr<Stage>> create(StageOptions options,
                                                               std::unique_ptr<Scheduler> scheduler,
                                                               std::shared_ptr<Tracer> tracer);
    Stage(const Stage&) = delete;
    Stage& operator=(const Stage&) = delete;
    ~Stage();  // stop()

    // Binds the PULL endpoint, subscribes to aborts, starts the scheduler and the threads.
    [[nodiscard]] Status start();
    // Stops the threads and the scheduler, releases every request, closes the relay. Idempotent.
    void stop();
    // True once a shutdown message arrived (the host then stops the process).
    [[nodiscard]] bool shutdown_requested() const;

    [[nodiscard]] const std::string& name() const;
    [[nodiscard]] StageStats stats() const;

    // Same-process dispatch (called by LocalDispatcher on the sender's thread; never blocks on
    // the receiver's compute). The payload and chunk are shared read-only.
    void receive_local_payload(const std::string& from_stage,
                               std::shared_ptr<const StagePayload> payload);
    void receive_local_stream(const std::string& from_stage, const std::string& request_id,
                              std::shared_ptr<const StreamChunk> chunk);
    void receive_local_stream_signal(const std::string& from_stage, const std::string& request_id,
                                     bool done, std::optional<std::string> error);

  private:
    struct State;
    explicit Stage(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::pipeline

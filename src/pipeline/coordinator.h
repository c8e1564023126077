#pragma once
// Coordinator: the global request router of pipeline.md. It sends new requests to the entry
// stage, receives completions and stream chunks from stages, merges the results of several
// terminal stages, broadcasts aborts, and resolves each request exactly once.
//
// Request lifecycle: pending (accepted, submit not yet sent) -> running (submit sent) ->
// completed | failed | aborted. A request fails when any stage reports an error for it (the
// coordinator then broadcasts an abort so every other stage drops it too), when its deadline
// passes, or when a stage process dies (mark_stage_down). Ids are unique among live requests.
//
// The entry stage receives SubmitMessage{payload = {request_id, request, data = request.inputs}}.
// Results: with one terminal stage, the request's result is that stage's payload; with several,
// it is {request_id, request, data = {terminal_stage_name: that stage's data, ...}}.
//
// Threads: one IO thread (the control plane's) delivers stage messages and runs the event
// callbacks; a timer thread enforces deadlines. Every public method may be called from any
// thread; submit() and RequestStream::next() block and must not be called from a callback.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "proto/messages.h"

namespace omnirt::pipeline {

using Duration = std::chrono::milliseconds;

struct CoordinatorOptions {
    std::string coordinator_endpoint;  // bound PULL: completions, streams, heartbeats
    std::string abort_endpoint;        // bound PUB: abort broadcasts
    std::map<std::string, std::string> stage_endpoints;  // every stage's PULL endpoint
    std::string entry_stage;
    std::vector<std::string> terminal_stages;
    std::optional<std::string> terminal_stages_fn;  // registry name (FunctionKind::terminal_stages)
    // Live requests the coordinator accepts; start_request fails with resource_exhausted above.
    std::size_t max_live_requests = 65536;
    // A stage whose last heartbeat is older than this is reported as not alive by health().
    Duration heartbeat_timeout = Duration(5000);
    // Events a RequestStream holds before its consumer reads them; above it the request fails
    // with resource_exhausted (the IO thread never waits for a slow consumer).
    std::size_t stream_queue_capacity = 4096;
    // The pipeline's edges (each stage's `next` and `stream_to` targets), so that supervision
    // touches only the requests that may pass through a stage: those whose terminal stages are
    // reachable from it. Empty: every stage may lie on every request's path.
    std::map<std::string, std::vector<std::string>> stage_targets;
    // Replicated stages (docs/pipeline.md "Replicas"): stage -> the PULL endpoint of each of its
    // replicas (two or more; stage_endpoints holds replica 0's), and stage -> its replica group
    // (its process group: the group's stages run in the same replica processes, so a request
    // gets one replica per group). Heartbeats and supervision name replica k "{stage}.r{k}".
    std::map<std::string, std::vector<std::string>> replica_endpoints;
    std::map<std::string, std::string> replica_groups;
};

// A stage as supervision sees it. running: serving (alive when its heartbeats are current);
// restarting: its process died and a new one is being started; failed: given up on for good.
enum class StageState : std::uint8_t { running, restarting, failed };
[[nodiscard]] std::string_view to_string(StageState state);

enum class RequestState : std::uint8_t { pending, running, completed, failed, aborted };
[[nodiscard]] std::string_view to_string(RequestState state);

struct RequestOptions {
    // Absolute deadline; the request fails with deadline_exceeded when it passes.
    std::optional<std::chrono::system_clock::time_point> deadline;
};

struct RequestEvent {
    enum class Kind : std::uint8_t { chunk, completed, failed, aborted };
    Kind kind = Kind::chunk;
    std::string request_id;
    // chunk: a StreamMessage from a stage, in the order the coordinator received them.
    std::string from_stage;
    std::int64_t chunk_index = 0;
    Value chunk;
    Value metadata;
    // completed: the (merged) result.
    StagePayload result;
    // failed / aborted: why; a failure names the stage ("stage 'decode': ...").
    Error error;
    [[nodiscard]] bool terminal() const { return kind != Kind::chunk; }
};

// Runs for every chunk, then exactly once with a terminal event, never concurrently for one
// request. Chunks and stage-reported ends run on the coordinator's IO thread; an end caused by
// abort(), mark_stages_down() or stop() runs on that caller's thread, a deadline on the timer
// thread. Must not block; may end its own request (abort) but not call stop().
using EventCallback = std::function<void(RequestEvent event)>;

struct StageHealth {
    std::string stage;       // the stage, or "{stage}.r{k}" for replica k of a replicated stage
    std::string replica_of;  // a replica's stage (empty for a stage without replicas)
    int replica = -1;        // a replica's index
    bool alive = false;      // running and a heartbeat seen within heartbeat_timeout
    StageState state = StageState::running;
    std::string down_reason;    // why it is restarting or failed (empty when running)
    std::int64_t restarts = 0;  // restarts supervision scheduled since the pipeline started
    std::int64_t pid = 0;
    std::int64_t queue_depth = 0;
    std::int64_t active_requests = 0;
    std::int64_t processed = 0;
    std::int64_t compute_ns = 0;            // the stage's compute time since it started
    std::vector<proto::EdgeTraffic> edges;  // its relay traffic per target stage
    // Stages with a KV cache (proto::HeartbeatMessage): blocks held by requests (not counting
    // the prefix cache's) and in all, requests held by a pause, tokens generated since the
    // stage started. 0 for other stages.
    std::int64_t kv_blocks_used = 0;
    std::int64_t kv_blocks_total = 0;
    std::int64_t paused_requests = 0;
    std::int64_t generated_tokens = 0;
};

struct HealthReport {
    bool healthy = false;  // started, not stopped, every stage running and alive
    std::string reason;    // why not healthy, naming the stage (empty when healthy)
    // For liveness probes: started, not stopped, no stage failed and no running stage silent. A
    // restarting stage is being healed, so it leaves the pipeline live (but not healthy).
    bool live = false;
    // Not healthy, but only replicas are down: every stage still has a replica serving (so
    // every request is served). The reason then starts with "degraded: ".
    bool degraded = false;
    std::vector<StageHealth> stages;  // in stage_endpoints order; replicas of a stage in a row
    std::map<std::string, std::int64_t> requests_by_state;  // live: pending, running; totals:
                                                            // completed, failed, aborted
    // Stage messages dropped: unknown or ended requests, non-terminal completions, duplicates.
    std::uint64_t ignored_messages = 0;
};

class RequestStream;

class Coordinator {
  public:
    [[nodiscard]] static Result<std::unique_ptr<Coordinator>> create(CoordinatorOptions options);
    Coordinator(const Coordinator&) = delete;
    Coordinator& operator=(const Coordinator&) = delete;
    ~Coordinator();  // stop()

    // Binds the PULL and the PUB and starts the IO and timer threads.
    [[nodiscard]] Status start();
    // Blocks until `stage_count` stages subscribed to the abort broadcast (so an abort sent
    // right after start-up reaches them all). deadline_exceeded otherwise.
    [[nodiscard]] Status wait_for_stages(std::size_t stage_count, Duration timeout);
    // Blocks until every stage has sent its first heartbeat (so health() reports it alive).
    // deadline_exceeded naming the silent stages; unavailable once stopped.
    [[nodiscard]] Status wait_for_heartbeats(Duration timeout);

    // Accepts a request and sends it to the entry stage. Fails (callback never called) with
    // already_exists for a live duplicate id or the id of a request that supervision failed
    // (messages about it may still be in flight), invalid_argument for an empty id, unavailable
    // when a stage the request may pass through is restarting, failed or silent, or the
    // coordinator is stopped, resource_exhausted above max_live_requests, deadline_exceeded
    // when options.deadline has already passed (nothing is sent). A stage that has not sent its
    // first heartbeat yet does not block requests (it may still be starting).
    [[nodiscard]] Status start_request(const std::string& request_id, OmniRequest request,
                                       RequestOptions options, EventCallback on_event);
    // One result: blocks until the request ends. Stream chunks are discarded.
    [[nodiscard]] Result<StagePayload> submit(const std::string& request_id, OmniRequest request,
                                              RequestOptions options = {});
    // Ordered events: chunks, then one terminal event.
    [[nodiscard]] Result<std::unique_ptr<RequestStream>> stream(const std::string& request_id,
                                                                OmniRequest request,
                                                                RequestOptions options = {});
    // Ends a live request as aborted (terminal event kind aborted, error code aborted with
    // `reason`) and broadcasts the abort to every stage. not_found for unknown or ended ids.
    [[nodiscard]] Status abort(const std::string& request_id, const std::string& reason);
    // Flow control for a client that reads slower than the request produces output: `paused`
    // asks every stage to hold the request (keep its state, produce nothing more for it), false
    // lets it go on (proto::PauseMessage, broadcast like an abort). Only a change is broadcast;
    // a request that completes while paused is resumed everywhere (so no stage keeps the pause).
    // Chunks already on their way still arrive. not_found for unknown or ended ids.
    [[nodiscard]] Status pause(const std::string& request_id, bool paused);

    // Supervision (the runner): the stages of a dead process. Every live request that may pass
    // through one of them fails with unavailable ("stage 'x' is down: <reason>"); the stages
    // take `state` (restarting or failed) and new requests that may pass through them are
    // refused with unavailable ("stage 'x' is restarting: <reason>" / "stage 'x' failed:
    // <reason>"). Heartbeats are ignored from here on until mark_stages_restarted. A restarting
    // state counts one restart. The ids of the failed requests are not accepted again (a dead
    // incarnation's late messages about them must not reach a new request).
    void mark_stages_down(const std::vector<std::string>& stages, const std::string& reason,
                          StageState state = StageState::failed);
    // Supervision: the restarting stages' new process `pid` is ready. Each stage is running
    // again with the first heartbeat from `pid` that arrives after the new process's abort
    // subscriptions (heartbeats of other pids are ignored). When `pid` is the incarnation whose
    // heartbeats the stage last sent (a node whose link came back), no new subscription is
    // awaited.
    void mark_stages_restarted(const std::vector<std::string>& stages, std::int64_t pid);

    // Profiler control: sent to every stage.
    [[nodiscard]] Status start_profile(const std::string& trace_path_template);
    [[nodiscard]] Status stop_profile();

    [[nodiscard]] HealthReport health() const;
    [[nodiscard]] std::size_t live_requests() const;

    // Fails every live request with unavailable ("coordinator stopped"), sends shutdown to every
    // stage, closes the sockets. Idempotent.
    void stop();

  private:
    struct State;
    explicit Coordinator(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

// Pull side of Coordinator::stream(). Destroying it before the terminal event aborts the request.
class RequestStream {
  public:
    virtual ~RequestStream() = default;
    // The next event; deadline_exceeded when none arrives within `timeout`; nullopt after the
    // terminal event was returned.
    [[nodiscard]] virtual Result<std::optional<RequestEvent>> next(Duration timeout) = 0;
    [[nodiscard]] virtual const std::string& request_id() const = 0;
};

}  // namespace omnirt::pipeline

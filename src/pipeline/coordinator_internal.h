#pragma once
// Internals of the Coordinator, shared by its .cpp files; not part of the public interface.
//
// Locking: CoordinatorCore::mutex_ guards the request table, the deadline index, the stage
// records and the counters. A request's delivery_mutex serialises its callback calls (so a chunk
// never follows the terminal event). Order: a delivery mutex may be held while taking mutex_,
// never the reverse; control-plane sends and publishes never run under mutex_ (a full send queue
// would block the caller while the IO thread waits for mutex_).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "control/control_plane.h"
#include "core/registry.h"
#include "pipeline/coordinator.h"

namespace omnirt::pipeline::detail {

using SteadyClock = std::chrono::steady_clock;

// One accepted request.
struct RequestEntry {
    // Set before the entry is published in the table, then read-only.
    std::string id;
    std::vector<std::string> terminals;
    std::optional<OmniRequest> request;  // kept to build the merged result of several terminals
    std::optional<SteadyClock::time_point> deadline;
    std::map<std::string, int> replicas;  // replica group -> the replica chosen at admission

    // Guarded by CoordinatorCore::mutex_.
    RequestState state = RequestState::pending;
    std::map<std::string, StagePayload> results;  // terminal stage -> its payload
    // Client-stream accounting (pipeline/client_stream.h): chunks received per stage, chunks
    // the terminal results say were sent, and whether every terminal result is in.
    std::map<std::string, std::int64_t> chunks_received;
    std::map<std::string, std::int64_t> chunks_expected;
    bool results_complete = false;
    bool paused = false;  // the stages were asked to hold it (Coordinator::pause)

    // Guarded by delivery_mutex (recursive: a callback may end its own request).
    std::recursive_mutex delivery_mutex;
    std::shared_ptr<const EventCallback> callback;  // released after the terminal event
    bool ended = false;                             // the terminal event was delivered
};

// What the coordinator knows about one stage (heartbeats, supervision).
struct StageRecord {
    std::string stage;  // the stage this record (or replica of it) belongs to
    int replica = -1;   // the replica index; -1 for a stage without replicas
    std::optional<SteadyClock::time_point> last_seen;
    StageState state = StageState::running;
    std::string down_reason;
    std::int64_t restarts = 0;
    // Set by supervision: only heartbeats of this pid count (0: none, the process is dead).
    // Unset until the first restart: any pid counts (in-process hosts, the first processes).
    std::optional<std::int64_t> accepted_pid;
    // The abort subscriptions the coordinator had received when the stage went down, and how
    // many it needs before a restarted stage counts as running (so that an abort published for
    // a request admitted after the restart reaches the new process).
    std::size_t subscriptions_at_down = 0;
    std::size_t subscriptions_needed = 0;
    std::int64_t pid = 0;
    std::int64_t queue_depth = 0;
    std::int64_t active_requests = 0;
    std::int64_t processed = 0;
    std::int64_t compute_ns = 0;
    std::vector<proto::EdgeTraffic> edges;
    std::int64_t kv_blocks_used = 0;
    std::int64_t kv_blocks_total = 0;
    std::int64_t paused_requests = 0;
    std::int64_t generated_tokens = 0;
};

// A process group that runs several replicas (CoordinatorOptions::replica_groups).
struct ReplicaGroup {
    std::vector<std::string> stages;
    int replicas = 0;
    std::uint64_t next = 0;  // round-robin position (guarded by CoordinatorCore::mutex_)
};

// Which stages a request may pass through, from the pipeline's edges: a stage is on the path
// to terminal t when it is reachable from the entry stage and t is reachable from it. Immutable
// after construction.
class StagePaths {
  public:
    explicit StagePaths(const CoordinatorOptions& options);
    // True when `stage` may lie on the path of a request with `terminals`; always true when the
    // options name no edges.
    [[nodiscard]] bool on_path(const std::vector<std::string>& terminals,
                               const std::string& stage) const;

  private:
    bool known_ = false;
    std::map<std::string, std::set<std::string>> upstream_;  // terminal -> stages on its paths
};

// Ids of requests supervision failed, so that none is accepted again while a dead incarnation's
// messages about it may still arrive. Bounded: the oldest id is forgotten first.
class Quarantine {
  public:
    explicit Quarantine(std::size_t capacity) : capacity_(capacity) {}
    void add(const std::string& id);
    [[nodiscard]] bool contains(const std::string& id) const { return ids_.contains(id); }

  private:
    std::size_t capacity_;
    std::set<std::string> ids_;
    std::deque<std::string> order_;
};

// The Coordinator's implementation. Thread safety as in coordinator.h.
class CoordinatorCore {
  public:
    [[nodiscard]] static Result<std::unique_ptr<CoordinatorCore>> create(
        CoordinatorOptions options);
    CoordinatorCore(const CoordinatorCore&) = delete;
    CoordinatorCore& operator=(const CoordinatorCore&) = delete;
    ~CoordinatorCore();  // stop()

    [[nodiscard]] Status start();
    [[nodiscard]] Status wait_for_stages(std::size_t stage_count, Duration timeout);
    [[nodiscard]] Status wait_for_heartbeats(Duration timeout);

    // `entry` is fresh with its callback set (the callback may hold a weak_ptr to it). On
    // success the request is live (or already ended: its callback ran); on failure the callback
    // is never called.
    [[nodiscard]] Status start_entry(const std::shared_ptr<RequestEntry>& entry,
                                     const std::string& request_id, OmniRequest request,
                                     const RequestOptions& options);
    // Ends a live request with `kind` (failed or aborted) and `error`, broadcasting an abort.
    // not_found when the request is not live (ended, or never started).
    [[nodiscard]] Status end_entry(const std::shared_ptr<RequestEntry>& entry,
                                   RequestEvent::Kind kind, Error error);
    [[nodiscard]] Status abort(const std::string& request_id, const std::string& reason);
    [[nodiscard]] Status pause(const std::string& request_id, bool paused);

    void mark_stages_down(const std::vector<std::string>& stages, const std::string& reason,
                          StageState state);
    void mark_stages_restarted(const std::vector<std::string>& stages, std::int64_t pid);
    [[nodiscard]] Status send_to_every_stage(const proto::ControlMessage& message);
    [[nodiscard]] HealthReport health() const;
    [[nodiscard]] std::size_t live_requests() const;
    [[nodiscard]] const CoordinatorOptions& options() const { return options_; }
    void stop();

  private:
    explicit CoordinatorCore(CoordinatorOptions options);

    // IO thread.
    void on_message(proto::ControlMessage message);
    void on_complete(proto::CompleteMessage message);
    void on_stream(proto::StreamMessage message);
    void on_heartbeat(const proto::HeartbeatMessage& message);
    // Timer thread.
    void run_timer();

    [[nodiscard]] Result<std::vector<std::string>> terminals_for(const OmniRequest& request) const;
    // Why a new request with `terminals` is refused now (mutex_ held), or ok.
    [[nodiscard]] Status admission_locked(SteadyClock::time_point now,
                                          const std::vector<std::string>& terminals) const;
    // Replicas (mutex_ held): the replicas of `group` whose stages all serve now; one per
    // group on the path of a request with `terminals` (sticky by `key`, else round-robin).
    [[nodiscard]] std::vector<int> serving_replicas_locked(const ReplicaGroup& group,
                                                           SteadyClock::time_point now) const;
    [[nodiscard]] bool group_on_path(const std::vector<std::string>& terminals,
                                     const ReplicaGroup& group) const;
    [[nodiscard]] std::map<std::string, int> choose_replicas_locked(
        SteadyClock::time_point now, const std::vector<std::string>& terminals,
        std::optional<std::uint64_t> key);
    // Why `stage` is not serving now (mutex_ held), or ok.
    [[nodiscard]] Status stage_status_locked(const std::string& stage, const StageRecord& record,
                                             SteadyClock::time_point now) const;
    [[nodiscard]] bool stage_alive_locked(const StageRecord& record,
                                          SteadyClock::time_point now) const;
    // Removes a live entry from the table and the deadline index and counts its final state.
    // False when `entry` is not the live request of its id.
    bool detach_locked(const std::shared_ptr<RequestEntry>& entry, RequestState final_state);
    // When every terminal result is in and every client chunk they account for has arrived:
    // detaches the entry and returns its completed event.
    std::optional<RequestEvent> try_complete_locked(const std::shared_ptr<RequestEntry>& entry);
    // Detaches every live request (mutex_ held).
    std::vector<std::shared_ptr<RequestEntry>> detach_all_locked(RequestState final_state);

    // Callback delivery (no mutex_ held).
    static void deliver_chunk(const std::shared_ptr<RequestEntry>& entry, RequestEvent event);
    static void deliver_terminal(const std::shared_ptr<RequestEntry>& entry, RequestEvent event);
    static RequestEvent terminal_event(const RequestEntry& entry, RequestEvent::Kind kind,
                                       Error error);
    void publish_abort(const std::string& request_id, const std::string& reason);
    void publish_pause(const std::string& request_id, bool paused);
    // A request that completed while paused: resumed everywhere, so no stage keeps its pause.
    void forget_pause(const std::shared_ptr<RequestEntry>& entry);

    CoordinatorOptions options_;
    const StagePaths paths_;
    std::optional<TerminalStagesFn> terminal_fn_;
    std::unique_ptr<control::ControlPlane> plane_;

    mutable std::mutex mutex_;
    std::condition_variable timer_wake_;
    std::condition_variable heartbeat_seen_;  // a stage's first heartbeat, or stop
    std::unordered_map<std::string, std::shared_ptr<RequestEntry>> requests_;
    std::set<std::pair<SteadyClock::time_point, RequestEntry*>> deadlines_;
    std::map<std::string, StageRecord> stages_;  // one per stage, or per stage replica
    // Fixed after construction: every stage (replica) and its endpoint; the replica groups.
    std::vector<std::pair<std::string, std::string>> instance_endpoints_;
    std::map<std::string, ReplicaGroup> groups_;
    bool started_ = false;
    bool stopped_ = false;
    Quarantine quarantine_{65536};
    std::uint64_t completed_ = 0;
    std::uint64_t failed_ = 0;
    std::uint64_t aborted_ = 0;
    std::uint64_t ignored_ = 0;

    std::mutex lifecycle_mutex_;  // serialises start() and stop()
    std::thread timer_;
};

}  // namespace omnirt::pipeline::detail

namespace omnirt::pipeline {

struct Coordinator::State {
    std::unique_ptr<detail::CoordinatorCore> core;
};

}  // namespace omnirt::pipeline

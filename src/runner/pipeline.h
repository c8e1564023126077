#pragma once
// Pipeline: the C++ API that runs a declared pipeline. start() prepares the runtime plan in a
// private runtime directory, starts the coordinator in this process and every process group
// either as a child process of the `omnirt` binary (Placement::processes, the serving layout) or
// hosted in this process (Placement::in_process, for tests and embedding), waits until every
// stage is ready, subscribed and has sent its first heartbeat (so health() reports a started
// pipeline healthy), and supervises the children.
//
// Supervision policy: restart within a budget (config::RestartPolicy, the config's `restart:`).
// A child that exits while the pipeline runs makes the live requests that may pass through its
// stages fail at once (unavailable, naming the stage and the exit status; requests whose
// terminal stages the dead stages cannot reach go on), and its stages report `restarting`: new
// requests that would pass through them are refused with that reason. After a back-off the
// process group is started again from the same plan; it reconnects its control sockets, makes a
// fresh relay, and its stages are `running` again with its first heartbeat. More than
// `max_restarts` exits within `window_s` (or a group that cannot be restarted: a TP rank, a
// gloo / nccl relay world) fail its stages for good: health reports `failed` with the reason,
// and requests through them are refused until the server is restarted. `max_restarts: 0` is
// the old fail-fast policy. A restarted stage has lost whatever state it held (KV caches of the
// requests that failed with it); weights are loaded again.
//
// Thread safety: submit / stream / abort / health may be called from any thread; start and stop
// from one owner thread, which must outlive the pipeline: children get PR_SET_PDEATHSIG, which
// fires when the thread that started them exits.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/runtime_plan.h"
#include "config/schema.h"
#include "core/error.h"
#include "pipeline/coordinator.h"

namespace omnirt::runner {

enum class Placement : std::uint8_t { processes, in_process };

struct PipelineOptions {
    Placement placement = Placement::processes;
    // The `omnirt` binary children run; empty: this executable (/proc/self/exe).
    std::string binary;
    // Where the runtime directory is created; empty: from the config's endpoints.
    std::string runtime_base;
    std::chrono::milliseconds startup_timeout{60000};
    std::chrono::milliseconds shutdown_grace{10000};
    std::chrono::milliseconds relay_timeout{60000};
    std::chrono::milliseconds heartbeat_interval{1000};
    std::size_t max_live_requests = 65536;
    // Several nodes (docs/multi_node.md): every node's address, index = node rank (empty: one
    // node). start() then runs the coordinator and the process groups of node 0 only.
    std::vector<std::string> node_addresses;
    // Several nodes: called once the coordinator listens, before start() waits for every stage,
    // to hand the plan to the other nodes (runner::NodeHub::serve_plan). Its error fails start().
    std::function<Status(std::shared_ptr<const config::RuntimePlan>, pipeline::Coordinator&)>
        on_coordinator_started;
    // Several nodes: called first by stop() (also when start() fails after
    // on_coordinator_started), while the coordinator still exists: stops the other nodes and
    // whatever reports to the coordinator about them (runner::NodeHub::stop).
    std::function<void()> before_stop;
};

// Where supervision reports the stages of a process group that went down or came back: the
// coordinator for start(), the head for start_node() (runner/node_agent.h). Called from the
// supervision threads; must not block for long.
struct StageEvents {
    std::function<void(const std::vector<std::string>& stages, const std::string& reason,
                       pipeline::StageState state)>
        down;
    std::function<void(const std::vector<std::string>& stages, std::int64_t pid)> restarted;
};

class Pipeline {
  public:
    // `config` must have passed validation (config::load_pipeline_file does that). Registers the
    // built-in backends and stages first. On failure nothing is left running.
    [[nodiscard]] static Result<std::unique_ptr<Pipeline>> start(
        const config::PipelineConfig& config, PipelineOptions options = {});
    // Several nodes, a rank other than 0: starts the process groups `plan` places on node
    // `node_rank` as child processes (in a private runtime directory that replaces the plan's)
    // and supervises them as start() does under `restart`, reporting to `events` instead of a
    // coordinator (the coordinator runs on the head). coordinator(), submit(), stream(),
    // abort() and health() must not be called on the result.
    [[nodiscard]] static Result<std::unique_ptr<Pipeline>> start_node(
        config::RuntimePlan plan, int node_rank, const config::RestartPolicy& restart,
        StageEvents events, PipelineOptions options = {});
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;
    ~Pipeline();  // stop()

    [[nodiscard]] pipeline::Coordinator& coordinator();
    [[nodiscard]] const config::RuntimePlan& plan() const;

    [[nodiscard]] Result<StagePayload> submit(const std::string& request_id, OmniRequest request,
                                              pipeline::RequestOptions options = {});
    [[nodiscard]] Result<std::unique_ptr<pipeline::RequestStream>> stream(
        const std::string& request_id, OmniRequest request, pipeline::RequestOptions options = {});
    [[nodiscard]] Status abort(const std::string& request_id, const std::string& reason);
    [[nodiscard]] pipeline::HealthReport health() const;

    // Child pids by process name (empty for in-process placement): the current incarnations.
    [[nodiscard]] std::map<std::string, int> process_ids() const;

    // The ranks of a tensor-parallel stage over several nodes (docs/multi_node.md; the head's
    // NodeHub and the node agents call it): stops the current incarnations of this node's
    // process groups `processes` (SIGKILL: a rank whose group broke has nothing to save) and
    // keeps them down, with no restart and no report (start false); or starts them afresh,
    // stopping what runs first (start true): once ready, their stages are reported restarted
    // (not by TP follower ranks, which the coordinator hears nothing from). Names this node does
    // not run are ignored. Asynchronous: the restart thread does it, in call order. Any thread.
    void control_processes(const std::vector<std::string>& processes, bool start,
                           const std::string& reason);

    // Shuts the stages down (shutdown message, then SIGTERM after shutdown_grace, then SIGKILL),
    // stops the coordinator, removes the runtime directory. Idempotent.
    void stop();

  private:
    struct State;
    explicit Pipeline(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

// Registers built-ins, loads and validates `path` with `overrides` (`--set` form), and starts it.
[[nodiscard]] Result<std::unique_ptr<Pipeline>> start_pipeline_file(
    const std::string& path, const std::vector<std::string>& overrides = {},
    PipelineOptions options = {});

}  // namespace omnirt::runner

#pragma once
// The resolved plan runtime prep derives from a validated PipelineConfig: which OS processes
// exist and which stages each hosts, every stage's control endpoint and relay settings, the
// normal and stream edges with their fast paths, merged factory arguments. The runner starts
// child processes from this plan; children never re-read the config file.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/schema.h"
#include "core/registry.h"

namespace omnirt::config {

struct ResolvedRelay {
    std::string backend;
    std::string device;  // "cpu" or "cuda:N"
    double slot_size_mb = kDefaultSlotSizeMb;
    std::int64_t credits = kDefaultCredits;
    std::int64_t rank = 0;        // this stage's process in the relay world
    std::int64_t world_size = 1;  // processes that do external IO (non-TP + TP rank 0)
};

struct TpRank {
    std::string stage;
    int rank = 0;
    int size = 1;
    // Rendezvous of the stage's process group: "file://<runtime_dir>/tp-<stage>.store" for ipc
    // endpoints, "tcp://host:port" (a port of its own) for tcp.
    std::string rendezvous;
    // Ranks > 0: the control endpoint where rank 0 sends the stage's work and aborts (empty for
    // rank 0, which uses the stage's endpoint).
    std::string endpoint;
};

struct ProcessPlan {
    std::string name;
    std::vector<std::string> stages;  // in config order
    std::optional<int> gpu;           // the one GPU its stages use, if any
    std::optional<TpRank> tp;         // set for the per-rank processes of a TP stage
    std::int64_t relay_rank = -1;     // -1 for TP follower ranks (no external IO)
    // A process group with `replicas: N > 1` runs as N processes "{group}.r{k}": this is
    // replica `replica` of `replicas`.
    int replica = 0;
    int replicas = 1;
    int node = 0;  // the node rank that runs it
};

// The name of replica `replica` of a process group or stage: "{base}.r{replica}".
[[nodiscard]] inline std::string replica_name(const std::string& base, int replica) {
    return base + ".r" + std::to_string(replica);
}

enum class EdgeKind { normal, stream };

struct Edge {
    std::string from;
    std::string to;
    EdgeKind kind = EdgeKind::normal;
    bool same_process = false;  // LOCAL_OBJECT dispatch possible
    bool same_gpu = false;      // different processes on the same primary GPU (stream IPC path)
    // What carries it: "local" (same-process dispatch), else the relay backend: the pipeline's
    // relay_backend between processes of one node, remote_relay_backend between nodes, and
    // "{relay_backend}+{remote_relay_backend}" when replicas on several nodes make it both.
    std::string tier;
};

struct StagePlan {
    std::string name;
    std::string factory;
    Map factory_args;     // factory_args + runtime_overrides + injected model_path / gpu_id
    std::string process;  // the process doing its external IO (TP: rank 0)
    std::vector<std::string> processes;  // every process of the stage (TP: one per rank)
    std::vector<int> gpu;
    int tp_size = 1;
    std::string endpoint;  // control-plane PULL endpoint (replica 0's for a replicated stage)
    ResolvedRelay relay;
    // Replicas (docs/config.md "Replicas"): with replicas > 1, `processes` holds one process per
    // replica and `replica_endpoints` the PULL endpoint of each (empty when replicas is 1).
    int replicas = 1;
    std::vector<std::string> replica_endpoints;

    std::vector<std::string> next;
    bool terminal = false;
    std::optional<std::string> route_fn;
    std::vector<std::string> wait_for;
    std::optional<std::string> wait_for_fn;
    std::optional<std::string> merge_fn;
    std::vector<std::string> stream_to;
    std::optional<std::string> stream_done_to_fn;
    std::map<std::string, std::string> project_payload;
    double fan_in_timeout_s = kDefaultFanInTimeoutS;
    // The node rank that runs its processes (replica 0's: replica_node(); a TP stage's rank 0's,
    // where its IO and rendezvous are; its other ranks may run elsewhere: nodes_of_stage()).
    int node = 0;

    // Derived from next / stream_to and placement.
    std::vector<std::string> local_targets;            // next targets in the same process
    std::vector<std::string> local_stream_targets;     // stream targets in the same process
    std::vector<std::string> same_gpu_stream_targets;  // other process, same primary GPU
    std::vector<std::string> stream_sources;           // stages that stream into this one
};

struct RuntimePlan {
    std::string name;
    std::string model_path;
    std::string relay_backend;
    std::string entry_stage;
    std::vector<std::string> terminal_stages;
    std::optional<std::string> terminal_stages_fn;

    EndpointScheme scheme = EndpointScheme::ipc;
    std::string runtime_dir;           // private per-instance directory (ipc sockets, stores)
    std::string coordinator_endpoint;  // coordinator PULL: completions and streams
    std::string abort_endpoint;        // coordinator PUB: abort broadcasts
    // gloo / nccl relay world: "file://<runtime_dir>/relay.store" or "tcp://host:port"; empty
    // for the other backends.
    std::string relay_rendezvous;

    // Several nodes (docs/multi_node.md): each node's address, index = node rank; the endpoints
    // of a node's stages bind there. Empty for one node.
    std::vector<std::string> node_addresses;
    // The config's `nodes:` names (index = node rank; may be shorter than node_addresses, or
    // empty): messages and health name a node by them.
    std::vector<std::string> node_names;
    // The relay backend of edges between nodes ("ucx"); empty for one node.
    std::string remote_relay_backend;

    std::vector<StagePlan> stages;  // config order
    std::vector<ProcessPlan> processes;
    std::vector<Edge> edges;
    std::map<std::string, std::string> env_defaults;
    std::vector<std::string> plugins;

    [[nodiscard]] const StagePlan* find_stage(const std::string& name) const;
    [[nodiscard]] const ProcessPlan* find_process(const std::string& name) const;
    // Stage objects that run (one per stage and replica; TP followers host none): what the
    // coordinator waits for at start.
    [[nodiscard]] std::size_t stage_instances() const;
    // "gpu-a" for a named node, else its rank ("1").
    [[nodiscard]] std::string node_name(int rank) const;
    // "node 1 (10.0.0.2)", or "node gpu-a (rank 1, 10.0.0.2)" for a named node; the address
    // left out when the plan has none.
    [[nodiscard]] std::string node_label(int rank) const;
    // Every node that runs a process of `stage` (its replicas, or its TP ranks), ascending.
    [[nodiscard]] std::vector<int> nodes_of_stage(const StagePlan& stage) const;
};

// Replica `replica` (0..replicas-1) of `stage`: the node its process runs on, and its process's
// relay rank (what a put to that replica names). For a stage without replicas, the stage's.
[[nodiscard]] int replica_node(const RuntimePlan& plan, const StagePlan& stage, int replica);
[[nodiscard]] std::int64_t replica_relay_rank(const RuntimePlan& plan, const StagePlan& stage,
                                              int replica);

// How messages name node `rank`: "node 1 (10.0.0.2)", or "node gpu-a (rank 1, 10.0.0.2)" when
// `names` (the config's `nodes:`) names it; the address left out when empty.
[[nodiscard]] std::string node_label(int rank, const std::string& address,
                                     const std::vector<std::string>& names);

// How a stage running in `process` names itself to the coordinator (heartbeats, supervision):
// the stage name, or replica_name(stage, k) in replica k of a replicated process group.
[[nodiscard]] std::string stage_instance(const std::string& stage, const ProcessPlan& process);

struct PrepOptions {
    // The instance's runtime directory. Empty: a preview path under the endpoints' base path
    // (nothing is created; the runner creates the real one with RuntimeDirectory).
    std::string runtime_dir;
    const Registry* registry = nullptr;  // for injectable args; null = Registry::global()
    // Several nodes: every node's address (index = node rank, at least 2). Endpoints become tcp,
    // each on its node's address from endpoints.base_port up; a stage's `node` must be below
    // the count. Empty: one node, endpoints as the config says.
    std::vector<std::string> node_addresses;
};

// The relay backend between nodes.
inline constexpr const char* kRemoteRelayBackend = "ucx";

// Builds the plan of a config that passed validation. Fails only for conditions validation
// cannot know (an ipc path too long for a Unix socket, tcp ports past 65535).
[[nodiscard]] Result<RuntimePlan> prepare_runtime(const PipelineConfig& config,
                                                  const PrepOptions& options = {});

// Where instance runtime directories go: endpoints.base_path, else $XDG_RUNTIME_DIR when it
// exists, else /tmp.
[[nodiscard]] std::string runtime_base_path(const EndpointsConfig& endpoints);

}  // namespace omnirt::config

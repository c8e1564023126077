#pragma once
// The declarative pipeline config (config.md): PipelineConfig, StageConfig, RelayConfig and
// EndpointsConfig with every field and default of the spec, plus the few fields omnirt adds
// (documented in docs/config.md). Loaded from YAML or JSON by config/load.h, checked by
// config/validate.h, turned into a process plan by config/runtime_prep.h.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"

namespace omnirt::config {

inline constexpr double kDefaultSlotSizeMb = 16.0;
inline constexpr std::int64_t kDefaultCredits = 8;
inline constexpr double kDefaultFanInTimeoutS = 60.0;
inline constexpr int kDefaultTcpBasePort = 17000;
inline constexpr std::int64_t kDefaultMaxRestarts = 3;
inline constexpr double kDefaultRestartWindowS = 300.0;
inline constexpr std::int64_t kDefaultBackoffInitialMs = 500;
inline constexpr std::int64_t kDefaultBackoffMaxMs = 10000;
inline constexpr int kMaxReplicas = 64;
// The largest node rank a `node:` field may name.
inline constexpr int kMaxNodeRank = 1023;

// Where a config value came from: a file position ("pipeline.yaml:12:5") or a command-line
// override ("--set stages.thinker.gpu=1").
struct SourceLocation {
    std::string source;  // file path, or "--set <path>=<value>"
    int line = 0;        // 1-based; 0 when the source has no lines
    int column = 0;      // 1-based; 0 when unknown
    [[nodiscard]] std::string to_string() const;
};

// Per-stage relay override. Unset fields are derived by runtime prep.
struct RelayConfig {
    std::optional<double> slot_size_mb;   // size of one pre-registered slot
    std::optional<std::int64_t> credits;  // slots a sender may have in flight
    std::optional<std::int64_t> rank;     // rank in the relay world (gloo / nccl)
    std::optional<std::int64_t> world_size;
    std::optional<std::string> device;  // "cpu" or "cuda:N"
};

struct StageConfig {
    std::string name;
    std::string factory;
    Map factory_args;
    std::vector<std::string> next;  // empty: no static downstream
    bool terminal = false;
    std::optional<std::string> route_fn;
    std::vector<int> gpu;      // empty: CPU placement
    bool gpu_is_list = false;  // `gpu: [..]` (TP form) rather than `gpu: N`
    int tp_size = 1;
    std::optional<std::string> process;
    std::vector<std::string> wait_for;
    std::optional<std::string> wait_for_fn;
    std::optional<std::string> merge_fn;
    std::vector<std::string> stream_to;
    std::optional<std::string> stream_done_to_fn;
    std::map<std::string, std::string> project_payload;
    std::optional<RelayConfig> relay;
    // omnirt additions:
    std::optional<double> gpu_memory_fraction;        // budget on its GPU, (0, 1]
    double fan_in_timeout_s = kDefaultFanInTimeoutS;  // AggregatedInput gives up after this
    // Processes running this stage's process group (docs/config.md "Replicas"), 1..kMaxReplicas.
    int replicas = 1;
    // The node (rank, 0..nnodes-1) whose `omnirt serve --node-rank` runs the stage's process
    // group; unset: node 0. Several nodes: docs/multi_node.md. `node: [a, b, ...]` places the
    // stage's processes one by one: replica k on the k-th node (one entry per replica), or, for a
    // tensor-parallel stage, TP rank r on the r-th node (one entry per rank); `node` is then the
    // first entry (replica 0's, or rank 0's: where the stage's IO and its rendezvous are).
    // Entries may be node names of the pipeline's `nodes:` list; the loader resolves them to
    // ranks (node_names keeps what was written).
    std::optional<int> node;
    std::vector<int> node_list;  // empty: every process of the stage on `node`
    // The names written in `node:` (one per entry of the list, or one for `node: NAME`); empty
    // when the field gives ranks.
    std::vector<std::string> node_names;
    bool node_list_written = false;  // `node:` was a list (node_list once resolved)

    // Where the stage and each of its fields were written ("next" -> location).
    SourceLocation location;
    std::map<std::string, SourceLocation> field_locations;

    [[nodiscard]] bool on_gpu() const { return !gpu.empty(); }
    [[nodiscard]] bool is_tp() const { return tp_size > 1; }
    // The node of replica `replica` (0 when `node` is unset); `replica` below node_list's size
    // when the list is given. Not for a TP stage's list (node_of_tp_rank).
    [[nodiscard]] int node_of_replica(int replica) const {
        return node_list.empty() || is_tp() ? node.value_or(0)
                                            : node_list.at(static_cast<std::size_t>(replica));
    }
    // The node of TP rank `rank` (0..tp_size-1): node_list[rank] when the list is given.
    [[nodiscard]] int node_of_tp_rank(int rank) const {
        return node_list.empty() ? node.value_or(0) : node_list.at(static_cast<std::size_t>(rank));
    }
    // The location of `field`, or of the stage when the field was not written.
    [[nodiscard]] const SourceLocation& location_of(const std::string& field) const;
};

enum class EndpointScheme { ipc, tcp };

struct EndpointsConfig {
    EndpointScheme scheme = EndpointScheme::ipc;
    // ipc: directory for the per-instance runtime directory (default $XDG_RUNTIME_DIR or /tmp).
    std::optional<std::string> base_path;
    // tcp: host the sockets bind and connect to, and the first port of the allocation.
    std::string host = "127.0.0.1";
    int base_port = kDefaultTcpBasePort;
};

// Supervision of stage processes (omnirt addition, docs/config.md "Restart"): a process group
// that dies while the pipeline runs is restarted after back-off (initial, doubling, capped at
// max) as long as it has been restarted fewer than `max_restarts` times within the last
// `window_s` seconds; past that budget its stages are failed for good. max_restarts 0: fail fast.
struct RestartPolicy {
    std::int64_t max_restarts = kDefaultMaxRestarts;
    double window_s = kDefaultRestartWindowS;
    std::int64_t backoff_initial_ms = kDefaultBackoffInitialMs;
    std::int64_t backoff_max_ms = kDefaultBackoffMaxMs;
};

struct PipelineConfig {
    std::string model_path;
    std::vector<StageConfig> stages;
    std::optional<std::string> name;
    std::optional<std::string> entry_stage;
    std::string relay_backend = "shm";
    std::vector<std::vector<std::string>> fused_stages;
    std::map<std::string, Map> runtime_overrides;
    std::map<std::string, std::string> env_defaults;
    EndpointsConfig endpoints;
    std::optional<std::string> terminal_stages_fn;
    std::optional<std::string> config_cls;
    // omnirt additions:
    std::vector<std::string> plugins;  // shared libraries that register functions (absolute)
    double gpu_memory_limit = 1.0;     // share of each GPU the pipeline may budget, (0, 1]
    RestartPolicy restart;
    // `nodes: [head, gpu-a, ...]`: a name for each node, index = node rank (docs/multi_node.md);
    // `node:` may then name a node. Empty: nodes are known by rank only.
    std::vector<std::string> node_names;

    std::string source;  // file the config was read from ("<string>" for text)
    SourceLocation location;
    std::map<std::string, SourceLocation> field_locations;

    // Derived values (config.md): computed from the stages, never stored.
    [[nodiscard]] std::string resolved_name() const { return name.value_or(model_path); }
    [[nodiscard]] std::string resolved_entry_stage() const;
    [[nodiscard]] std::vector<std::string> terminal_stages() const;
    // stage name -> GPU ids (one id, or the TP list), for stages with `gpu` set.
    [[nodiscard]] std::map<std::string, std::vector<int>> gpu_placement() const;
    [[nodiscard]] const StageConfig* find_stage(const std::string& stage_name) const;
    [[nodiscard]] const SourceLocation& location_of(const std::string& field) const;
    // "gpu-a" for a node named in `nodes:`, else the rank ("1").
    [[nodiscard]] std::string node_name(int rank) const;
};

// Relay backends the config accepts. shm, ucx and gloo are built here; nccl needs a CUDA
// build of libtorch; nixl and mooncake are not available from our package sources (the relay
// registry says so when they are asked for).
[[nodiscard]] const std::vector<std::string>& known_relay_backends();

}  // namespace omnirt::config

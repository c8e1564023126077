// Node placement (docs/multi_node.md): a stage's `node` is a rank in 0..kMaxNodeRank, or a list
// of such ranks, one per replica (`node: [0, 1]` with `replicas: 2`) or one per rank of a
// tensor-parallel stage (`node: [0, 1]` with `tp_size: 2`); every stage of one process group
// (after fusion) is placed alike, and a c10d relay world (gloo / nccl) stays on one node. Node
// names (`nodes:`) were resolved to ranks by the loader.
// Whether the ranks exist is known only to `omnirt serve --nnodes` (runtime prep checks it against
// the nodes that joined).
#include <algorithm>
#include <map>

#include "config/process_groups.h"
#include "config/validate.h"

namespace omnirt::config::detail {
namespace {

// The node of each replica ("0, 1"), for messages.
std::string placement_text(const StageConfig& stage) {
    std::string text;
    for (int k = 0; k < std::max(stage.replicas, 1); ++k) {
        text += (k == 0 ? "" : ", ") + std::to_string(stage.node_of_replica(k));
    }
    return text;
}

// `node: [...]`: ranks in range, one per replica, or one per rank of a tensor-parallel stage.
// False when the list is unusable (the group check then skips the stage).
bool check_node_list(const PipelineConfig& config, std::size_t i, std::vector<Diagnostic>& out) {
    const StageConfig& stage = config.stages[i];
    bool usable = true;
    for (std::size_t k = 0; k < stage.node_list.size(); ++k) {
        const int rank = stage.node_list[k];
        if (rank < 0 || rank > kMaxNodeRank) {
            report(config, i, "node[" + std::to_string(k) + "]",
                   "node must be a node rank in 0.." + std::to_string(kMaxNodeRank) + " (got " +
                       std::to_string(rank) + ")",
                   out);
            usable = false;
        }
    }
    const std::size_t entries = stage.node_list.size();
    const std::string listed =
        "node lists " + std::to_string(entries) + " node" + (entries == 1 ? "" : "s");
    if (stage.is_tp()) {
        if (entries != static_cast<std::size_t>(stage.tp_size)) {
            report(config, i, "node",
                   listed + " but the stage has tp_size " + std::to_string(stage.tp_size) +
                       "; give one node per TP rank (rank r runs on the r-th), or one node for "
                       "every rank",
                   out);
            usable = false;
        }
        return usable;
    }
    if (entries != static_cast<std::size_t>(stage.replicas)) {
        report(config, i, "node",
               listed + " but the stage has replicas " + std::to_string(stage.replicas) +
                   "; give one node per replica, or one node for all of them",
               out);
        usable = false;
    }
    return usable;
}

}  // namespace

void validate_nodes(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    bool any_remote = false;
    std::vector<bool> usable(config.stages.size(), true);
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        if (!stage.node_list.empty()) {
            usable[i] = check_node_list(config, i, out);
            for (int rank : stage.node_list) any_remote = any_remote || rank != 0;
            continue;
        }
        if (!stage.node) continue;
        if (*stage.node < 0 || *stage.node > kMaxNodeRank) {
            report(config, i, "node",
                   "node must be a node rank in 0.." + std::to_string(kMaxNodeRank) + " (got " +
                       std::to_string(*stage.node) + ")",
                   out);
            continue;
        }
        any_remote = any_remote || *stage.node != 0;
    }
    // Every stage of a process group placed like the group's first stage (its replicas, too).
    const auto groups = process_group_of_stages(config);
    std::map<std::string, std::size_t> first_of_group;
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        auto group = groups.find(stage.name);
        if (group == groups.end() || !usable[i]) continue;
        auto [first, inserted] = first_of_group.emplace(group->second, i);
        if (inserted) continue;
        const StageConfig& other = config.stages[first->second];
        if (!stage.node_list.empty() || !other.node_list.empty()) {
            if (stage.replicas == other.replicas &&
                placement_text(stage) != placement_text(other)) {
                report(config, i, "node",
                       "stage '" + stage.name + "' shares process group '" + group->second +
                           "' with stage '" + other.name + "', whose replicas run on nodes " +
                           placement_text(other) + ", but its own on nodes " +
                           placement_text(stage) + "; a process group's replicas are placed alike",
                       out);
            }
            continue;
        }
        if (stage.node.value_or(0) != other.node.value_or(0)) {
            report(config, i, "node",
                   "stage '" + stage.name + "' shares process group '" + group->second +
                       "' with stage '" + other.name + "' on node " +
                       std::to_string(other.node.value_or(0)) + ", but is placed on node " +
                       std::to_string(stage.node.value_or(0)) +
                       "; a process group runs on one node",
                   out);
        }
    }
    if (any_remote && (config.relay_backend == "gloo" || config.relay_backend == "nccl")) {
        report(config, "relay_backend",
               "relay_backend '" + config.relay_backend +
                   "' forms one process group on one node; with stages on several nodes use "
                   "shm (ucx is used between nodes) or ucx",
               out);
    }
}

}  // namespace omnirt::config::detail

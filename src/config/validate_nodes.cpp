// Node placement (docs/multi_node.md): a stage's `node` is a rank in 0..kMaxNodeRank, every
// stage of one process group (after fusion) runs on one node, and a c10d relay world (gloo /
// nccl) stays on one node. Whether the ranks exist is known only to `omnirt serve --nnodes`
// (runtime prep checks it against the nodes that joined).
#include <map>

#include "config/process_groups.h"
#include "config/validate.h"

namespace omnirt::config::detail {

void validate_nodes(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    bool any_remote = false;
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
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
    // Every stage of a process group on the node of the group's first stage.
    const auto groups = process_group_of_stages(config);
    std::map<std::string, std::size_t> first_of_group;
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        auto group = groups.find(stage.name);
        if (group == groups.end()) continue;
        auto [first, inserted] = first_of_group.emplace(group->second, i);
        if (inserted) continue;
        const StageConfig& other = config.stages[first->second];
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

// Replica rules (docs/config.md "Replicas"): `replicas` in range, one value per process group
// (replicas copy a whole process group), no replicas of TP stages, of GPU stages or in a gloo /
// nccl relay world, and no name that a replica's process or stage instance would take.
#include <map>
#include <set>

#include "config/process_groups.h"
#include "config/runtime_plan.h"
#include "config/validate.h"

namespace omnirt::config::detail {
namespace {

void check_stage(const PipelineConfig& config, std::size_t i, std::vector<Diagnostic>& out) {
    const StageConfig& stage = config.stages[i];
    if (stage.replicas < 1 || stage.replicas > kMaxReplicas) {
        report(config, i, "replicas",
               "'replicas' must be in 1.." + std::to_string(kMaxReplicas) + ", got " +
                   std::to_string(stage.replicas),
               out);
        return;
    }
    if (stage.replicas == 1) return;
    if (stage.is_tp()) {
        report(config, i, "replicas",
               "replicas of a tensor-parallel stage (tp_size " + std::to_string(stage.tp_size) +
                   ") are not supported; use tp_size 1 or replicas 1",
               out);
    }
    if (stage.on_gpu()) {
        report(config, i, "replicas",
               "replicas of a GPU stage are not supported yet (each replica would need its own "
               "GPU or a memory budget); remove 'gpu' or use replicas 1",
               out);
    }
    if (config.relay_backend == "gloo" || config.relay_backend == "nccl") {
        report(config, i, "replicas",
               "relay_backend '" + config.relay_backend +
                   "' has a fixed world of one process per stage; replicas need shm or ucx",
               out);
    }
}

}  // namespace

void validate_replicas(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    for (std::size_t i = 0; i < config.stages.size(); ++i) check_stage(config, i, out);
    // Replicas copy a whole process group (after fusion), so its stages agree on the count.
    const auto groups = process_group_of_stages(config);
    std::map<std::string, std::size_t> first_of_group;  // group -> first stage index
    std::set<std::string> names;                        // stage and process names in use
    for (const auto& stage : config.stages) {
        names.insert(stage.name);
        if (stage.process) names.insert(*stage.process);
    }
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        auto group = groups.find(stage.name);
        if (group == groups.end()) continue;  // TP or no process: reported elsewhere
        auto [first, inserted] = first_of_group.emplace(group->second, i);
        const StageConfig& other = config.stages[first->second];
        auto in_range = [](int n) { return n >= 1 && n <= kMaxReplicas; };
        if (!inserted && other.replicas != stage.replicas && in_range(other.replicas) &&
            in_range(stage.replicas)) {
            report(config, i, "replicas",
                   "stage '" + stage.name + "' has replicas " + std::to_string(stage.replicas) +
                       " but stage '" + other.name + "' in the same process group '" +
                       group->second + "' has " + std::to_string(other.replicas) +
                       "; replicas copy a whole process group, so its stages must agree",
                   out);
        }
        if (stage.replicas < 2 || stage.replicas > kMaxReplicas) continue;
        // The names the replicas take: processes "{group}.r{k}", stage instances "{stage}.r{k}".
        for (int k = 0; k < stage.replicas; ++k) {
            for (const std::string& base : {stage.name, group->second}) {
                std::string name = replica_name(base, k);
                if (names.contains(name)) {
                    report(config, i, "replicas",
                           "replica " + std::to_string(k) + " of '" + base + "' is named '" + name +
                               "', which is already the name of a stage or process",
                           out);
                }
            }
        }
    }
}

}  // namespace omnirt::config::detail

// Placement rules (config.md "Runtime Prep and Runner", "Tensor Parallelism"): `process` on
// non-TP stages, TP GPU lists, TP process ownership, one GPU per process group (after fusion
// merges groups), and memory budgets on GPUs shared by several process groups.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "config/validate.h"

namespace omnirt::config::detail {
namespace {

// The node of TP rank `rank`, while the node list may still be the wrong length (reported by
// validate_nodes).
int rank_node(const StageConfig& stage, int rank) {
    return static_cast<std::size_t>(rank) < stage.node_list.size() && stage.is_tp()
               ? stage.node_list[static_cast<std::size_t>(rank)]
               : stage.node.value_or(0);
}

bool valid_tp_list(const StageConfig& stage) {
    return stage.is_tp() && stage.gpu_is_list &&
           stage.gpu.size() == static_cast<std::size_t>(stage.tp_size);
}

// Rank processes beyond this many are not checked for name collisions (keeps a config with an
// absurd tp_size cheap to validate).
constexpr int kMaxCheckedRanks = 4096;

// The OS process names a stage occupies: its `process` for a non-TP stage; for a TP stage
// the prefix (`process` or the name) and every `{prefix}_tp{rank}`, all owned exclusively.
std::vector<std::string> process_names(const StageConfig& stage) {
    if (!stage.is_tp()) {
        if (stage.process && !stage.process->empty()) return {*stage.process};
        return {};
    }
    std::string prefix = stage.process.value_or(stage.name);
    std::vector<std::string> names{prefix};
    for (int rank = 0; rank < stage.tp_size && rank < kMaxCheckedRanks; ++rank) {
        names.push_back(prefix + "_tp" + std::to_string(rank));
    }
    return names;
}

void check_process_and_tp(const PipelineConfig& config, std::size_t i,
                          std::vector<Diagnostic>& out) {
    const StageConfig& stage = config.stages[i];
    if (!stage.is_tp() && !stage.process) {
        report(config, i, "process",
               "'process' is required for non-TP stages (stages with the same process share "
               "one OS process; e.g. 'process: pipeline' for a single process)",
               out);
    } else if (stage.process && stage.process->empty()) {
        report(config, i, "process", "'process' must not be empty", out);
    }
    if (stage.gpu_is_list && !stage.gpu.empty() &&
        stage.gpu.size() != static_cast<std::size_t>(stage.tp_size) && stage.tp_size >= 1) {
        report(config, i, "gpu",
               "'gpu' lists " + std::to_string(stage.gpu.size()) + " GPUs but tp_size is " +
                   std::to_string(stage.tp_size) + "; list one GPU per TP rank",
               out);
    }
    if (!stage.gpu_is_list && stage.on_gpu() && stage.is_tp()) {
        report(config, i, "gpu",
               "'gpu' is a single id but tp_size is " + std::to_string(stage.tp_size) +
                   "; list one GPU per TP rank (e.g. gpu: [0, 1])",
               out);
    }
    if (stage.is_tp()) {
        // Ranks on other nodes (`node: [...]`) may use the same GPU id: it is another device.
        std::set<std::pair<int, int>> seen;
        for (std::size_t k = 0; k < stage.gpu.size(); ++k) {
            const int node = rank_node(stage, static_cast<int>(k));
            if (!seen.insert({node, stage.gpu[k]}).second) {
                report(config, i, "gpu[" + std::to_string(k) + "]",
                       "GPU " + std::to_string(stage.gpu[k]) +
                           (node == 0 ? "" : " of node " + config.node_name(node)) +
                           " is listed twice; each TP rank needs its own GPU",
                       out);
            }
        }
    }
}

// TP ranks own their processes: no other stage may use any of a TP stage's process names.
void check_tp_ownership(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    std::map<std::string, std::size_t> first_user;
    std::set<std::pair<std::size_t, std::size_t>> reported;
    for (std::size_t b = 0; b < config.stages.size(); ++b) {
        for (const auto& name : process_names(config.stages[b])) {
            auto [it, inserted] = first_user.emplace(name, b);
            std::size_t a = it->second;
            if (inserted || a == b) continue;
            if (!config.stages[a].is_tp() && !config.stages[b].is_tp()) continue;
            if (!reported.emplace(a, b).second) continue;
            std::size_t tp = config.stages[b].is_tp() ? b : a;
            std::vector<std::string> owned = process_names(config.stages[tp]);
            report(config, b, "process",
                   "process name '" + name + "' is used by stage '" + stage_label(config, a) +
                       "' and stage '" + stage_label(config, b) + "'; TP stage '" +
                       stage_label(config, tp) + "' owns its processes (" + quoted_list(owned) +
                       ") exclusively",
                   out);
        }
    }
}

// Union-find over process names; fused groups merge the processes of their members.
class ProcessGroups {
  public:
    explicit ProcessGroups(const PipelineConfig& config) {
        for (const auto& stage : config.stages) {
            for (const auto& name : process_names(stage)) id(name);
        }
        for (const auto& group : config.fused_stages) {
            std::optional<std::size_t> first;
            for (const auto& member : group) {
                const StageConfig* stage = config.find_stage(member);
                if (stage == nullptr || stage->is_tp() || !stage->process) continue;
                std::size_t process = id(*stage->process);
                if (first) {
                    unite(*first, process);
                } else {
                    first = process;
                }
            }
        }
    }

    std::size_t root(const std::string& process) { return find(id(process)); }

    // "'p'" or "'p+q'" for a group merged by fusion.
    std::string label(std::size_t group) {
        if (labels_.empty()) {
            std::map<std::size_t, std::string> names;  // ids_ iterates in name order
            for (const auto& [name, index] : ids_) {
                std::string& joined = names[find(index)];
                joined += (joined.empty() ? "" : "+") + name;
            }
            for (auto& [root, joined] : names) labels_[root] = "'" + joined + "'";
        }
        return labels_[group];
    }

  private:
    std::size_t id(const std::string& name) {
        auto [it, inserted] = ids_.emplace(name, parent_.size());
        if (inserted) parent_.push_back(parent_.size());
        return it->second;
    }
    std::size_t find(std::size_t x) {
        while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
        return x;
    }
    void unite(std::size_t a, std::size_t b) { parent_[find(a)] = find(b); }

    std::map<std::string, std::size_t> ids_;
    std::vector<std::size_t> parent_;
    std::map<std::size_t, std::string> labels_;
};

struct GpuUse {
    std::vector<std::size_t> stages;  // stages with a rank on this GPU, in file order
    std::set<std::string> owners;     // process groups / TP rank processes on this GPU
};

void check_groups_and_gpus(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    ProcessGroups groups(config);
    std::map<std::size_t, std::pair<int, std::size_t>> group_gpu;  // group -> first GPU, stage
    std::map<std::pair<int, int>, GpuUse> gpus;  // (node, GPU id): a node's own devices
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        if (valid_tp_list(stage)) {
            std::string prefix = stage.process.value_or(stage.name);
            for (int rank = 0; rank < stage.tp_size; ++rank) {
                GpuUse& use = gpus[{rank_node(stage, rank), stage.gpu[rank]}];
                use.stages.push_back(i);
                use.owners.insert("'" + prefix + "_tp" + std::to_string(rank) + "'");
            }
            continue;
        }
        if (stage.is_tp() || stage.gpu.size() != 1 || !stage.process) continue;
        int gpu = stage.gpu.front();
        std::size_t group = groups.root(*stage.process);
        auto [it, inserted] = group_gpu.emplace(group, std::pair(gpu, i));
        if (!inserted && it->second.first != gpu) {
            report(config, i, "gpu",
                   "process group " + groups.label(group) + " already uses GPU " +
                       std::to_string(it->second.first) + " (stage '" +
                       stage_label(config, it->second.second) +
                       "'); a process group may hold "
                       "CPU stages and stages of at most one GPU",
                   out);
        }
        GpuUse& use = gpus[{stage.node.value_or(0), gpu}];
        use.stages.push_back(i);
        use.owners.insert(groups.label(group));
    }
    for (const auto& [node_and_gpu, use] : gpus) {
        const auto [node, gpu] = node_and_gpu;
        const std::string device =
            "GPU " + std::to_string(gpu) + (node == 0 ? "" : " of node " + config.node_name(node));
        std::vector<std::string> owners(use.owners.begin(), use.owners.end());
        std::string shared_by;
        for (const auto& owner : owners) shared_by += (shared_by.empty() ? "" : ", ") + owner;
        std::vector<std::string> missing;
        double sum = 0;
        for (std::size_t i : use.stages) {
            const auto& fraction = config.stages[i].gpu_memory_fraction;
            if (fraction) {
                sum += *fraction;
            } else {
                missing.push_back(stage_label(config, i));
            }
        }
        std::size_t first = use.stages.front();
        if (owners.size() > 1 && !missing.empty()) {
            std::size_t at = *std::find_if(use.stages.begin(), use.stages.end(), [&](auto i) {
                return !config.stages[i].gpu_memory_fraction;
            });
            report(config, at, "gpu",
                   device + " is shared by process groups " + shared_by +
                       "; every stage on a shared GPU must set gpu_memory_fraction (missing on " +
                       quoted_list(missing) + ")",
                   out);
        } else if (sum > config.gpu_memory_limit + 1e-9) {
            report(config, first, "gpu_memory_fraction",
                   device + " (process groups " + shared_by +
                       "): gpu_memory_fraction budgets sum to " + format_number(sum) +
                       ", more than gpu_memory_limit " + format_number(config.gpu_memory_limit),
                   out);
        }
    }
}

}  // namespace

void validate_placement(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    for (std::size_t i = 0; i < config.stages.size(); ++i) check_process_and_tp(config, i, out);
    check_tp_ownership(config, out);
    check_groups_and_gpus(config, out);
}

}  // namespace omnirt::config::detail

// Stage Fusion rules (config.md "Stage Fusion"): each fused group has at least two existing
// stages, no stage is in two groups, and the group is linear (each internal stage routes only
// to the next member), non-TP and on at most one GPU.
#include <map>
#include <set>

#include "config/validate.h"

namespace omnirt::config::detail {
namespace {

std::string list_text(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
    return "[" + out + "]";
}

}  // namespace

void validate_fusion(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    std::map<std::string, std::size_t> group_of;
    for (std::size_t g = 0; g < config.fused_stages.size(); ++g) {
        const auto& group = config.fused_stages[g];
        const std::string field = "fused_stages[" + std::to_string(g) + "]";
        if (group.size() < 2) {
            report(
                config, field,
                "a fused group needs at least 2 stages (got " + std::to_string(group.size()) + ")",
                out);
        }
        std::vector<const StageConfig*> members(group.size(), nullptr);
        for (std::size_t j = 0; j < group.size(); ++j) {
            const std::string member_field = field + "[" + std::to_string(j) + "]";
            const std::string& name = group[j];
            members[j] = config.find_stage(name);
            if (members[j] == nullptr) {
                report(config, member_field,
                       "unknown stage '" + name +
                           "' in 'fused_stages' (stages: " + stage_list(config) + ")",
                       out);
                continue;
            }
            auto [it, inserted] = group_of.emplace(name, g);
            if (!inserted) {
                report(config, member_field,
                       "stage '" + name + "' is already in fused_stages[" +
                           std::to_string(it->second) + "]; a stage joins at most one group",
                       out);
            }
            if (members[j]->is_tp()) {
                report(config, member_field,
                       "stage '" + name + "' is a TP stage (tp_size " +
                           std::to_string(members[j]->tp_size) + "); fused stages are non-TP",
                       out);
            }
        }
        for (std::size_t j = 0; j + 1 < group.size(); ++j) {
            const StageConfig* stage = members[j];
            if (stage == nullptr || members[j + 1] == nullptr) continue;
            if (stage->next.size() != 1 || stage->next.front() != group[j + 1]) {
                report(config, field + "[" + std::to_string(j) + "]",
                       "fused stages must be adjacent and linear: '" + group[j] +
                           "' must route only to '" + group[j + 1] + "' (its next is " +
                           list_text(stage->next) + ")",
                       out);
            }
        }
        std::set<int> gpus;
        for (const StageConfig* stage : members) {
            if (stage != nullptr && !stage->is_tp())
                gpus.insert(stage->gpu.begin(), stage->gpu.end());
        }
        if (gpus.size() > 1) {
            std::vector<std::string> ids;
            for (int gpu : gpus) ids.push_back(std::to_string(gpu));
            report(config, field,
                   "the fused group spans GPUs " + list_text(ids) +
                       "; a fused group must fit on at most one GPU",
                   out);
        }
    }
}

}  // namespace omnirt::config::detail

#include "config/process_groups.h"

namespace omnirt::config {

std::map<std::string, std::string> process_group_of_stages(const PipelineConfig& config) {
    // Union-find over process names; the representative is the earliest-seen process.
    std::map<std::string, std::string> parent;
    std::map<std::string, std::size_t> first_seen;
    auto find = [&](const std::string& p) -> std::string {
        std::string root = p;
        while (parent[root] != root) root = parent[root];
        for (std::string cur = p; parent[cur] != root;) {
            std::string up = parent[cur];
            parent[cur] = root;
            cur = up;
        }
        return root;
    };
    auto unite = [&](const std::string& a, const std::string& b) {
        std::string ra = find(a), rb = find(b);
        if (ra == rb) return;
        if (first_seen[rb] < first_seen[ra]) std::swap(ra, rb);
        parent[rb] = ra;
    };

    std::map<std::string, std::string> stage_process;
    for (const auto& stage : config.stages) {
        if (stage.is_tp() || !stage.process) continue;
        const std::string& p = *stage.process;
        if (!parent.contains(p)) {
            parent[p] = p;
            first_seen[p] = first_seen.size();
        }
        stage_process[stage.name] = p;
    }
    for (const auto& group : config.fused_stages) {
        const std::string* first = nullptr;
        for (const auto& member : group) {
            auto it = stage_process.find(member);
            if (it == stage_process.end()) continue;
            if (first == nullptr) {
                first = &it->second;
            } else {
                unite(*first, it->second);
            }
        }
    }
    std::map<std::string, std::string> out;
    for (const auto& [stage, process] : stage_process) out[stage] = find(process);
    return out;
}

std::vector<std::string> tp_process_names(const StageConfig& stage) {
    std::string prefix = stage.process.value_or(stage.name);
    std::vector<std::string> names;
    for (int rank = 0; rank < stage.tp_size; ++rank) {
        names.push_back(prefix + "_tp" + std::to_string(rank));
    }
    return names;
}

}  // namespace omnirt::config

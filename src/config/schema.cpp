#include "config/schema.h"

namespace omnirt::config {

std::string SourceLocation::to_string() const {
    std::string out = source;
    if (line > 0) {
        out += ":" + std::to_string(line);
        if (column > 0) out += ":" + std::to_string(column);
    }
    return out;
}

const SourceLocation& StageConfig::location_of(const std::string& field) const {
    auto it = field_locations.find(field);
    return it == field_locations.end() ? location : it->second;
}

std::string PipelineConfig::resolved_entry_stage() const {
    if (entry_stage) return *entry_stage;
    return stages.empty() ? std::string() : stages.front().name;
}

std::vector<std::string> PipelineConfig::terminal_stages() const {
    std::vector<std::string> out;
    for (const auto& stage : stages) {
        if (stage.terminal) out.push_back(stage.name);
    }
    return out;
}

std::map<std::string, std::vector<int>> PipelineConfig::gpu_placement() const {
    std::map<std::string, std::vector<int>> out;
    for (const auto& stage : stages) {
        if (stage.on_gpu()) out[stage.name] = stage.gpu;
    }
    return out;
}

const StageConfig* PipelineConfig::find_stage(const std::string& stage_name) const {
    for (const auto& stage : stages) {
        if (stage.name == stage_name) return &stage;
    }
    return nullptr;
}

const SourceLocation& PipelineConfig::location_of(const std::string& field) const {
    auto it = field_locations.find(field);
    return it == field_locations.end() ? location : it->second;
}

std::string PipelineConfig::node_name(int rank) const {
    if (rank >= 0 && static_cast<std::size_t>(rank) < node_names.size()) {
        return node_names[static_cast<std::size_t>(rank)];
    }
    return std::to_string(rank);
}

const std::vector<std::string>& known_relay_backends() {
    static const std::vector<std::string> backends = {"shm",  "ucx",  "gloo",
                                                      "nccl", "nixl", "mooncake"};
    return backends;
}

}  // namespace omnirt::config

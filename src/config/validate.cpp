// validate_pipeline and the per-field rules (ranges, names, relay, endpoints, pipeline level).
#include "config/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace omnirt::config {
namespace detail {
namespace {

std::string top_level(const std::string& field) {
    return field.substr(0, field.find_first_of(".["));
}

const SourceLocation& locate_in(const std::map<std::string, SourceLocation>& locations,
                                const std::string& field, const SourceLocation& fallback) {
    auto it = locations.find(field);
    if (it != locations.end()) return it->second;
    // "relay.credits" -> "relay"; "fused_stages[1][0]" -> "fused_stages[1]" -> "fused_stages".
    std::string parent = field;
    while (true) {
        std::size_t cut = parent.find_last_of(".[");
        if (cut == std::string::npos || cut == 0) break;
        parent.resize(cut);
        it = locations.find(parent);
        if (it != locations.end()) return it->second;
    }
    it = locations.find(top_level(field));
    return it == locations.end() ? fallback : it->second;
}

void validate_relay(const PipelineConfig& config, std::size_t i, std::vector<Diagnostic>& out) {
    const RelayConfig& relay = *config.stages[i].relay;
    if (relay.slot_size_mb && !(*relay.slot_size_mb > 0)) {
        report(config, i, "relay.slot_size_mb", "slot_size_mb must be > 0", out);
    }
    if (relay.credits && *relay.credits < 1) {
        report(config, i, "relay.credits", "credits must be >= 1", out);
    }
    if (relay.rank && *relay.rank < 0) report(config, i, "relay.rank", "rank must be >= 0", out);
    if (relay.world_size && *relay.world_size < 1) {
        report(config, i, "relay.world_size", "world_size must be >= 1", out);
    } else if (relay.world_size && relay.rank && *relay.rank >= *relay.world_size) {
        report(config, i, "relay.rank",
               "rank " + std::to_string(*relay.rank) + " is not below world_size " +
                   std::to_string(*relay.world_size),
               out);
    }
    if (relay.device) {
        const std::string& device = *relay.device;
        bool valid = device == "cpu";
        if (device.starts_with("cuda:") && device.size() > 5 && device.size() <= 9) {
            valid = device.find_first_not_of("0123456789", 5) == std::string::npos;
        }
        if (!valid) {
            report(config, i, "relay.device",
                   "device '" + device + "' is not \"cpu\" or \"cuda:N\"", out);
        }
    }
}

void validate_stage_fields(const PipelineConfig& config, std::size_t i,
                           std::vector<Diagnostic>& out) {
    const StageConfig& stage = config.stages[i];
    if (stage.name.empty()) report(config, i, "name", "stage name must not be empty", out);
    if (stage.factory.empty()) report(config, i, "factory", "factory must not be empty", out);
    if (stage.tp_size < 1) {
        report(config, i, "tp_size",
               "tp_size must be >= 1 (got " + std::to_string(stage.tp_size) + ")", out);
    }
    if (stage.gpu_is_list && stage.gpu.empty()) {
        report(config, i, "gpu", "'gpu: []' lists no GPU; omit 'gpu' for CPU placement", out);
    }
    for (std::size_t k = 0; k < stage.gpu.size(); ++k) {
        if (stage.gpu[k] < 0) {
            std::string field = stage.gpu_is_list ? "gpu[" + std::to_string(k) + "]" : "gpu";
            report(config, i, field,
                   "GPU id must be >= 0 (got " + std::to_string(stage.gpu[k]) + ")", out);
        }
    }
    if (stage.gpu_memory_fraction) {
        double fraction = *stage.gpu_memory_fraction;
        if (!(fraction > 0 && fraction <= 1)) {
            report(config, i, "gpu_memory_fraction",
                   "gpu_memory_fraction must be in (0, 1] (got " + format_number(fraction) + ")",
                   out);
        } else if (!stage.on_gpu()) {
            report(config, i, "gpu_memory_fraction",
                   "gpu_memory_fraction is set but the stage has no 'gpu'", out);
        }
    }
    if (!(stage.fan_in_timeout_s > 0) || std::isinf(stage.fan_in_timeout_s)) {
        report(config, i, "fan_in_timeout_s",
               "fan_in_timeout_s must be a finite number > 0 (got " +
                   format_number(stage.fan_in_timeout_s) + ")",
               out);
    }
    if (stage.relay) validate_relay(config, i, out);
}

void validate_pipeline_fields(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    if (config.model_path.empty()) {
        report(config, "model_path", "model_path must not be empty", out);
    }
    if (config.stages.empty()) {
        report(config, "stages", "a pipeline needs at least one stage", out);
        return;
    }
    const auto& backends = known_relay_backends();
    if (std::find(backends.begin(), backends.end(), config.relay_backend) == backends.end()) {
        report(config, "relay_backend",
               "unknown relay_backend '" + config.relay_backend +
                   "' (known: " + quoted_list(backends) + ")",
               out);
    }
    if (!(config.gpu_memory_limit > 0 && config.gpu_memory_limit <= 1)) {
        report(config, "gpu_memory_limit",
               "gpu_memory_limit must be in (0, 1] (got " + format_number(config.gpu_memory_limit) +
                   ")",
               out);
    }
    const EndpointsConfig& endpoints = config.endpoints;
    if (endpoints.base_port < 1 || endpoints.base_port > 65535) {
        report(config, "endpoints.base_port",
               "base_port " + std::to_string(endpoints.base_port) + " is outside 1..65535", out);
    }
    if (endpoints.scheme == EndpointScheme::tcp && endpoints.host.empty()) {
        report(config, "endpoints.host", "host must not be empty for the tcp scheme", out);
    }
    if (endpoints.base_path && endpoints.base_path->empty()) {
        report(config, "endpoints.base_path", "base_path must not be empty when set", out);
    }
    if (config.entry_stage && config.find_stage(*config.entry_stage) == nullptr) {
        report(config, "entry_stage",
               "unknown stage '" + *config.entry_stage + "' (stages: " + stage_list(config) + ")",
               out);
    }
    if (config.terminal_stages().empty()) {
        report(config, "stages",
               "no stage is terminal; mark the final stage(s) with 'terminal: true'", out);
    }
    std::map<std::string, std::size_t> first_index;
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const std::string& name = config.stages[i].name;
        if (name.empty()) continue;
        auto [it, inserted] = first_index.emplace(name, i);
        if (!inserted) {
            report(config, i, "name",
                   "duplicate stage name '" + name + "' (first defined at " +
                       field_location(config.stages[it->second], "name").to_string() + ")",
                   out);
        }
    }
}

}  // namespace

std::string stage_label(const PipelineConfig& config, std::size_t index) {
    const std::string& name = config.stages[index].name;
    return name.empty() ? "stages[" + std::to_string(index) + "]" : name;
}

const SourceLocation& field_location(const StageConfig& stage, const std::string& field) {
    return locate_in(stage.field_locations, field, stage.location);
}

const SourceLocation& field_location(const PipelineConfig& config, const std::string& field) {
    return locate_in(config.field_locations, field, config.location);
}

void report(const PipelineConfig& config, std::size_t index, const std::string& field,
            std::string message, std::vector<Diagnostic>& out) {
    out.push_back(Diagnostic{field_location(config.stages[index], field),
                             stage_label(config, index), field, std::move(message)});
}

void report(const PipelineConfig& config, const std::string& field, std::string message,
            std::vector<Diagnostic>& out) {
    out.push_back(Diagnostic{field_location(config, field), "", field, std::move(message)});
}

std::string stage_list(const PipelineConfig& config) {
    constexpr std::size_t kMaxListed = 20;  // keep messages short for very large configs
    std::string out;
    std::size_t listed = 0;
    for (const auto& stage : config.stages) {
        if (stage.name.empty()) continue;
        if (listed == kMaxListed) return out + ", ...";
        if (!out.empty()) out += ", ";
        out += stage.name;
        ++listed;
    }
    return out.empty() ? "none" : out;
}

std::string quoted_list(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& name : names) {
        if (!out.empty()) out += ", ";
        out += "'" + name + "'";
    }
    return out;
}

std::string format_number(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", value);
    return buffer;
}

void validate_fields(const PipelineConfig& config, std::vector<Diagnostic>& out) {
    validate_pipeline_fields(config, out);
    for (std::size_t i = 0; i < config.stages.size(); ++i) validate_stage_fields(config, i, out);
}

}  // namespace detail

std::vector<Diagnostic> validate_pipeline(const PipelineConfig& config,
                                          const ValidateOptions& options) {
    std::vector<Diagnostic> out;
    detail::validate_fields(config, out);
    detail::validate_topology(config, out);
    detail::validate_placement(config, out);
    detail::validate_fusion(config, out);
    detail::validate_replicas(config, out);
    detail::validate_nodes(config, out);
    if (options.check_registry) {
        const Registry& registry = options.registry ? *options.registry : Registry::global();
        detail::validate_registry(config, registry, out);
    }
    sort_diagnostics(out);
    return out;
}

}  // namespace omnirt::config

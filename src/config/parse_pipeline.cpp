// parse_pipeline (config/load.h): a config document -> PipelineConfig.
#include "config/load.h"
#include "config/parse_fields.h"

namespace omnirt::config {
namespace {

using detail::FieldReader;

void read_stages(FieldReader& reader, PipelineConfig& config) {
    const ConfigNode* value = reader.find("stages");
    if (value == nullptr) return;
    if (!value->is_sequence()) {
        reader.wrong_type(*value, "stages", "a list of stages");
        return;
    }
    if (value->items.empty()) {
        reader.report(value->location, "stages",
                      "'stages' is empty; a pipeline needs at least one");
        return;
    }
    for (std::size_t i = 0; i < value->items.size(); ++i) {
        config.stages.push_back(parse_stage(value->items[i], i, reader.diagnostics()));
    }
}

void read_fused_stages(FieldReader& reader, PipelineConfig& config) {
    const ConfigNode* value = reader.find("fused_stages");
    if (value == nullptr || value->is_null()) return;
    constexpr std::string_view kExpected = "a list of stage-name lists";
    if (!value->is_sequence()) {
        reader.wrong_type(*value, "fused_stages", kExpected);
        return;
    }
    for (std::size_t i = 0; i < value->items.size(); ++i) {
        const ConfigNode& group = value->items[i];
        std::string group_field = "fused_stages[" + std::to_string(i) + "]";
        reader.locations()[group_field] = group.location;
        if (!group.is_sequence()) {
            reader.wrong_type(group, group_field, "a list of stage names");
            continue;
        }
        std::vector<std::string> members;
        for (std::size_t j = 0; j < group.items.size(); ++j) {
            std::string member_field = group_field + "[" + std::to_string(j) + "]";
            reader.locations()[member_field] = group.items[j].location;
            auto name = detail::string_of(group.items[j]);
            if (name) {
                members.push_back(*name);
            } else {
                reader.wrong_type(group.items[j], member_field, "a stage name (a string)");
            }
        }
        config.fused_stages.push_back(std::move(members));
    }
}

void read_runtime_overrides(FieldReader& reader, PipelineConfig& config) {
    const ConfigNode* value = reader.find("runtime_overrides");
    if (value == nullptr || value->is_null()) return;
    if (!value->is_map()) {
        reader.wrong_type(*value, "runtime_overrides", "a map of stage name to argument map");
        return;
    }
    for (const auto& entry : value->entries) {
        std::string stage_field = "runtime_overrides." + entry.key;
        reader.locations()[stage_field] = entry.key_location;
        if (entry.value.is_null()) {
            config.runtime_overrides[entry.key] = Map{};
            continue;
        }
        if (!entry.value.is_map()) {
            reader.wrong_type(entry.value, stage_field, "a map of factory arguments");
            continue;
        }
        auto converted = to_value(entry.value);
        if (!converted) {
            reader.report(entry.value.location, stage_field, converted.error().message);
            continue;
        }
        config.runtime_overrides[entry.key] = converted->as_map();
    }
}

void read_endpoints(FieldReader& pipeline_reader, PipelineConfig& config) {
    const ConfigNode* value = pipeline_reader.find("endpoints");
    if (value == nullptr || value->is_null()) return;
    if (!value->is_map()) {
        pipeline_reader.wrong_type(*value, "endpoints", "a map");
        return;
    }
    FieldReader reader(*value, "", "endpoints.", config.field_locations,
                       pipeline_reader.diagnostics());
    reader.reject_unknown_keys({"scheme", "base_path", "host", "base_port"});
    EndpointsConfig& endpoints = config.endpoints;
    if (auto scheme = reader.string("scheme", false)) {
        if (*scheme == "ipc") {
            endpoints.scheme = EndpointScheme::ipc;
        } else if (*scheme == "tcp") {
            endpoints.scheme = EndpointScheme::tcp;
        } else {
            reader.report(value->find("scheme")->location, "scheme",
                          "unknown scheme '" + *scheme + "' (valid: ipc, tcp)");
        }
    }
    endpoints.base_path = reader.string("base_path");
    if (auto host = reader.string("host", false)) endpoints.host = *host;
    if (auto port = reader.integer("base_port", false)) {
        if (*port < 1 || *port > 65535) {
            reader.report(value->find("base_port")->location, "base_port",
                          "base_port " + std::to_string(*port) + " is outside 1..65535");
        } else {
            endpoints.base_port = static_cast<int>(*port);
        }
    }
}

void read_restart(FieldReader& pipeline_reader, PipelineConfig& config) {
    const ConfigNode* value = pipeline_reader.find("restart");
    if (value == nullptr || value->is_null()) return;
    if (!value->is_map()) {
        pipeline_reader.wrong_type(*value, "restart", "a map");
        return;
    }
    FieldReader reader(*value, "", "restart.", config.field_locations,
                       pipeline_reader.diagnostics());
    reader.reject_unknown_keys(
        {"max_restarts", "window_s", "backoff_initial_ms", "backoff_max_ms"});
    RestartPolicy& policy = config.restart;
    constexpr std::int64_t kMaxRestarts = 1000;
    constexpr std::int64_t kMaxBackoffMs = 3600000;  // one hour
    auto integer_in = [&](std::string_view key, std::int64_t low, std::int64_t high,
                          std::int64_t& out) {
        auto read = reader.integer(key, false);
        if (!read) return;
        if (*read < low || *read > high) {
            reader.report(value->find(key)->location, key,
                          std::string(key) + " " + std::to_string(*read) + " is outside " +
                              std::to_string(low) + ".." + std::to_string(high));
            return;
        }
        out = *read;
    };
    integer_in("max_restarts", 0, kMaxRestarts, policy.max_restarts);
    integer_in("backoff_initial_ms", 0, kMaxBackoffMs, policy.backoff_initial_ms);
    integer_in("backoff_max_ms", 0, kMaxBackoffMs, policy.backoff_max_ms);
    if (auto window = reader.number("window_s", false)) {
        if (!(*window > 0) || *window > 86400) {
            reader.report(value->find("window_s")->location, "window_s",
                          "window_s must be in (0, 86400] seconds");
        } else {
            policy.window_s = *window;
        }
    }
    if (policy.backoff_max_ms < policy.backoff_initial_ms) {
        reader.report(value->location, "backoff_max_ms",
                      "backoff_max_ms (" + std::to_string(policy.backoff_max_ms) +
                          ") is below backoff_initial_ms (" +
                          std::to_string(policy.backoff_initial_ms) + ")");
    }
}

}  // namespace

PipelineConfig parse_pipeline(const ConfigNode& root, std::vector<Diagnostic>& diagnostics) {
    PipelineConfig config;
    config.source = root.location.source;
    config.location = root.location;
    if (root.is_null()) {
        diagnostics.push_back(Diagnostic{root.location, "", "",
                                         "the config is empty; a pipeline needs at least "
                                         "'model_path' and 'stages'"});
        return config;
    }
    if (!root.is_map()) {
        diagnostics.push_back(
            Diagnostic{root.location, "", "",
                       detail::type_message(
                           root, "a pipeline config (a map with 'model_path' and 'stages')")});
        return config;
    }
    FieldReader reader(root, "", "", config.field_locations, diagnostics);
    reader.reject_unknown_keys({"model_path", "stages", "name", "entry_stage", "relay_backend",
                                "fused_stages", "runtime_overrides", "env_defaults", "endpoints",
                                "terminal_stages_fn", "config_cls", "plugins", "gpu_memory_limit",
                                "restart", "nodes"});
    reader.require("model_path");
    reader.require("stages");

    if (auto model_path = reader.string("model_path", false)) config.model_path = *model_path;
    read_stages(reader, config);
    config.name = reader.string("name");
    config.entry_stage = reader.string("entry_stage");
    if (auto backend = reader.string("relay_backend", false)) config.relay_backend = *backend;
    read_fused_stages(reader, config);
    read_runtime_overrides(reader, config);
    if (auto env = reader.string_map("env_defaults", /*scalars_as_text=*/true)) {
        config.env_defaults = std::move(*env);
    }
    read_endpoints(reader, config);
    config.terminal_stages_fn = reader.string("terminal_stages_fn");
    config.config_cls = reader.string("config_cls");
    if (auto plugins = reader.string_list("plugins")) config.plugins = std::move(*plugins);
    if (auto limit = reader.number("gpu_memory_limit", false)) config.gpu_memory_limit = *limit;
    read_restart(reader, config);
    detail::read_node_names(reader, config);
    detail::resolve_node_names(config, diagnostics);
    return config;
}

}  // namespace omnirt::config

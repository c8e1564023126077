// Registry rule: every factory and request-aware function a config names is registered
// (built in, or by a plugin listed under `plugins:`).
#include "config/validate.h"

namespace omnirt::config::detail {
namespace {

void check_name(const PipelineConfig& config, std::optional<std::size_t> stage,
                const std::string& field, const Registry& registry, FunctionKind kind,
                const std::string& name, std::vector<Diagnostic>& out) {
    if (name.empty() || registry.contains(kind, name)) return;
    std::string message = registry.unknown_name_error(kind, name).message;
    if (stage) {
        report(config, *stage, field, std::move(message), out);
    } else {
        report(config, field, std::move(message), out);
    }
}

}  // namespace

void validate_registry(const PipelineConfig& config, const Registry& registry,
                       std::vector<Diagnostic>& out) {
    for (std::size_t i = 0; i < config.stages.size(); ++i) {
        const StageConfig& stage = config.stages[i];
        auto check = [&](const std::string& field, FunctionKind kind,
                         const std::optional<std::string>& name) {
            if (name) check_name(config, i, field, registry, kind, *name, out);
        };
        check("factory", FunctionKind::factory, stage.factory);
        check("merge_fn", FunctionKind::merge, stage.merge_fn);
        check("route_fn", FunctionKind::route, stage.route_fn);
        check("wait_for_fn", FunctionKind::wait_for, stage.wait_for_fn);
        check("stream_done_to_fn", FunctionKind::stream_done, stage.stream_done_to_fn);
        for (const auto& [target, function] : stage.project_payload) {
            check("project_payload." + target, FunctionKind::projection, function);
        }
    }
    if (config.terminal_stages_fn) {
        check_name(config, std::nullopt, "terminal_stages_fn", registry,
                   FunctionKind::terminal_stages, *config.terminal_stages_fn, out);
    }
}

}  // namespace omnirt::config::detail

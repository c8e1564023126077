#pragma once
// validate_pipeline: the rules of config.md (routing rule, fan-in, streaming, Stage Fusion,
// Runtime Prep placement, Tensor Parallelism) and omnirt's additions, checked on a parsed
// PipelineConfig. Returns every violation, not just the first, each located at the field
// that causes it (the structs' field_locations), in source order. A config built in code
// (without locations) is validated the same way; its diagnostics then carry no line.
//
// Thread safety: pure function of its arguments; the registry it reads is thread-safe.
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "config/schema.h"
#include "core/registry.h"

namespace omnirt::config {

struct ValidateOptions {
    // Look up factory / merge_fn / route_fn / wait_for_fn / stream_done_to_fn /
    // project_payload / terminal_stages_fn names in the registry.
    bool check_registry = true;
    const Registry* registry = nullptr;  // null = Registry::global()
};

[[nodiscard]] std::vector<Diagnostic> validate_pipeline(const PipelineConfig& config,
                                                        const ValidateOptions& options = {});

namespace detail {

// The rule groups of validate_pipeline, one file each (validate_*.cpp); each appends to `out`.
void validate_fields(const PipelineConfig& config, std::vector<Diagnostic>& out);
void validate_topology(const PipelineConfig& config, std::vector<Diagnostic>& out);
void validate_placement(const PipelineConfig& config, std::vector<Diagnostic>& out);
void validate_fusion(const PipelineConfig& config, std::vector<Diagnostic>& out);
void validate_replicas(const PipelineConfig& config, std::vector<Diagnostic>& out);
void validate_nodes(const PipelineConfig& config, std::vector<Diagnostic>& out);
void validate_registry(const PipelineConfig& config, const Registry& registry,
                       std::vector<Diagnostic>& out);

// How diagnostics name a stage: its name, or "stages[i]" while it has none.
[[nodiscard]] std::string stage_label(const PipelineConfig& config, std::size_t index);
// The location of `field` ("next[1]"), else of its top-level field ("next"), else the stage's.
[[nodiscard]] const SourceLocation& field_location(const StageConfig& stage,
                                                   const std::string& field);
[[nodiscard]] const SourceLocation& field_location(const PipelineConfig& config,
                                                   const std::string& field);
// Appends a diagnostic about `field` of stage `index`.
void report(const PipelineConfig& config, std::size_t index, const std::string& field,
            std::string message, std::vector<Diagnostic>& out);
// Appends a pipeline-level diagnostic about `field`.
void report(const PipelineConfig& config, const std::string& field, std::string message,
            std::vector<Diagnostic>& out);
// "a, b, c" of every stage name, for "unknown stage" messages.
[[nodiscard]] std::string stage_list(const PipelineConfig& config);
// "'a', 'b'".
[[nodiscard]] std::string quoted_list(const std::vector<std::string>& names);
// "0.5", "1e+30": %g.
[[nodiscard]] std::string format_number(double value);

}  // namespace detail
}  // namespace omnirt::config

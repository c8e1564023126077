#pragma once
// Loading a pipeline config: YAML or JSON text -> `--set` overrides -> PipelineConfig ->
// plugins -> validation. Every problem is collected, not just the first, and each one names
// where it was written:
//
//     pipeline.yaml:12:5: stage 'thinker': field 'gpu': expected an integer or a list ...
//
// (diagnostics.h has the format). load_pipeline_* return the config or one invalid_argument
// Error listing every diagnostic, one per line, in source order; load_pipeline_report gives
// the diagnostics as a vector for `omnirt config validate`.
//
// Thread safety: the functions share no state except the registry, which is thread-safe;
// loading plugins has process-wide effects (config/plugins.h).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.h"
#include "config/node.h"
#include "config/schema.h"
#include "core/error.h"
#include "core/registry.h"

namespace omnirt::config {

struct LoadOptions {
    std::vector<std::string> overrides;  // `--set` assignments, "path=value", applied in order
    bool load_plugins = true;            // dlopen the config's `plugins:` into the registry
    bool check_registry = true;          // every factory / function name must be registered
    Registry* registry = nullptr;        // null = Registry::global()
};

struct LoadReport {
    std::optional<PipelineConfig> config;  // set exactly when `diagnostics` is empty
    std::vector<Diagnostic> diagnostics;   // in source order
    [[nodiscard]] bool ok() const { return diagnostics.empty(); }
};

// Reads `path` (YAML, or JSON, which is YAML flow syntax). Relative `plugins:` paths are
// resolved against the directory of `path`. Errors: not_found when the file cannot be read
// (naming the path and the reason); invalid_argument listing every diagnostic otherwise.
[[nodiscard]] Result<PipelineConfig> load_pipeline_file(const std::string& path,
                                                        const LoadOptions& options = {});

// The same for text already in memory; `source_name` is used in locations and becomes
// PipelineConfig::source. Relative `plugins:` paths are resolved against the directory of
// `source_name` when it names an existing file, otherwise against the working directory.
[[nodiscard]] Result<PipelineConfig> load_pipeline_text(std::string_view text,
                                                        const std::string& source_name,
                                                        const LoadOptions& options = {});

// The diagnostics as a vector. An unreadable file is one diagnostic located at the path.
[[nodiscard]] LoadReport load_pipeline_report(const std::string& path,
                                              const LoadOptions& options = {});
[[nodiscard]] LoadReport load_pipeline_text_report(std::string_view text,
                                                   const std::string& source_name,
                                                   const LoadOptions& options = {});

// Building blocks of the loader, for tools and tests.

// A document (after overrides) -> PipelineConfig, checking structure only: unknown keys (with
// the valid keys listed), wrong types (naming the expected type), missing required fields,
// and forms the structs cannot hold (`next: []`, an unknown endpoints scheme). Appends one
// diagnostic per problem and returns every field that could be read; relations between
// fields are validate_pipeline's job. `plugins` are returned as written.
[[nodiscard]] PipelineConfig parse_pipeline(const ConfigNode& root,
                                            std::vector<Diagnostic>& diagnostics);

// One element of `stages:`; `index` names the stage ("stages[2]") while it has no name.
[[nodiscard]] StageConfig parse_stage(const ConfigNode& node, std::size_t index,
                                      std::vector<Diagnostic>& diagnostics);

}  // namespace omnirt::config

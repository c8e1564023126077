#pragma once
// Process topology: which OS process hosts each stage (config.md, "Runtime Prep and Runner").
#include <map>
#include <string>
#include <vector>

#include "config/schema.h"

namespace omnirt::config {

// For every non-TP stage, the name of its process group after fusion: stages sharing a
// `process` value share a group, and each `fused_stages` group merges the process groups of its
// members. A merged group takes the name of its member process that appears first in stage
// order. TP stages are absent (each of their ranks owns a process of its own).
[[nodiscard]] std::map<std::string, std::string> process_group_of_stages(
    const PipelineConfig& config);

// "{prefix}_tp{rank}" with prefix = stage.process or the stage name.
[[nodiscard]] std::vector<std::string> tp_process_names(const StageConfig& stage);

}  // namespace omnirt::config

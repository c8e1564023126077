#pragma once
// Renders a RuntimePlan for `omnirt config show`: a readable text listing, JSON for tools, and a
// Mermaid graph (processes as subgraphs, normal and stream edges).
#include <string>

#include "config/runtime_plan.h"

namespace omnirt::config {

enum class PlanFormat { text, json, mermaid };

[[nodiscard]] Result<PlanFormat> parse_plan_format(const std::string& name);
[[nodiscard]] std::string render_plan(const RuntimePlan& plan, PlanFormat format);

}  // namespace omnirt::config

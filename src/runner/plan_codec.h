#pragma once
// The fully resolved process spec a child receives: a RuntimePlan in msgpack (via Value), so a
// child never re-reads or re-validates the pipeline config (DECISIONS.md).
//
// Thread safety: pure functions.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/runtime_plan.h"
#include "core/error.h"
#include "core/value.h"

namespace omnirt::runner {

[[nodiscard]] Value plan_to_value(const config::RuntimePlan& plan);
// invalid_argument naming the field for anything malformed (the spec file is an external input).
[[nodiscard]] Result<config::RuntimePlan> plan_from_value(const Value& value);

[[nodiscard]] Result<std::vector<std::uint8_t>> encode_plan(const config::RuntimePlan& plan);
[[nodiscard]] Result<config::RuntimePlan> decode_plan(std::span<const std::uint8_t> bytes);

// Writes the encoded plan to `path` (mode 0600) / reads it back.
[[nodiscard]] Status write_plan_file(const config::RuntimePlan& plan, const std::string& path);
[[nodiscard]] Result<config::RuntimePlan> read_plan_file(const std::string& path);

}  // namespace omnirt::runner

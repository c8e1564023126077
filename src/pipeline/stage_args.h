#pragma once
// Typed reads of a stage's factory arguments (StageContext::args), for stage factories: a
// missing or null key gives the fallback; a value of another type is an invalid_argument error
// naming the stage and the argument.
//
// Thread safety: pure functions of their arguments.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "pipeline/scheduler.h"
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::pipeline {

[[nodiscard]] Result<std::int64_t> int_arg(const StageContext& context, std::string_view key,
                                           std::int64_t fallback);
// int_arg() within [low, high]; outside it an invalid_argument error "<who>: arg 'key' must be in
// [low, high], got v".
[[nodiscard]] Result<std::int64_t> int_arg_in(const StageContext& context, const std::string& who,
                                              std::string_view key, std::int64_t fallback,
                                              std::int64_t low, std::int64_t high);
[[nodiscard]] Result<double> number_arg(const StageContext& context, std::string_view key,
                                        double fallback);
[[nodiscard]] Result<bool> bool_arg(const StageContext& context, std::string_view key,
                                    bool fallback);
[[nodiscard]] Result<std::string> string_arg(const StageContext& context, std::string_view key,
                                             std::string fallback);

// A SimpleScheduler for `context` running `compute`: stage name and tracer from the context,
// arg worker_threads (an int in [1, 256], default `default_workers`) and arg inline_compute
// (SimpleSchedulerOptions::inline_when_idle, default false).
[[nodiscard]] Result<std::unique_ptr<Scheduler>> make_simple_scheduler(
    const StageContext& context, ComputeFn compute, std::int64_t default_workers = 1);

}  // namespace omnirt::pipeline

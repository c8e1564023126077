#include "pipeline/stage_args.h"

#include <utility>

namespace omnirt::pipeline {
namespace {

Error wrong_arg(const StageContext& context, std::string_view key, std::string_view expected,
                const Value& value) {
    return Error{ErrorCode::invalid_argument,
                 "stage '" + context.stage_name + "': arg '" + std::string(key) + "' must be " +
                     std::string(expected) + ", got " + std::string(to_string(value.kind()))};
}

}  // namespace

Result<std::int64_t> int_arg(const StageContext& context, std::string_view key,
                             std::int64_t fallback) {
    const auto it = context.args.find(key);
    if (it == context.args.end() || it->second.is_null()) return fallback;
    if (const std::int64_t* value = it->second.if_int()) return *value;
    return fail(wrong_arg(context, key, "an integer", it->second));
}

Result<std::int64_t> int_arg_in(const StageContext& context, const std::string& who,
                                std::string_view key, std::int64_t fallback, std::int64_t low,
                                std::int64_t high) {
    OMNI_TRY(std::int64_t value, int_arg(context, key, fallback));
    if (value < low || value > high) {
        return fail(ErrorCode::invalid_argument,
                    who + ": arg '" + std::string(key) + "' must be in [" + std::to_string(low) +
                        ", " + std::to_string(high) + "], got " + std::to_string(value));
    }
    return value;
}

Result<double> number_arg(const StageContext& context, std::string_view key, double fallback) {
    const auto it = context.args.find(key);
    if (it == context.args.end() || it->second.is_null()) return fallback;
    if (it->second.is_number()) return it->second.as_number();
    return fail(wrong_arg(context, key, "a number", it->second));
}

Result<bool> bool_arg(const StageContext& context, std::string_view key, bool fallback) {
    const auto it = context.args.find(key);
    if (it == context.args.end() || it->second.is_null()) return fallback;
    if (const bool* value = it->second.if_bool()) return *value;
    return fail(wrong_arg(context, key, "a boolean", it->second));
}

Result<std::string> string_arg(const StageContext& context, std::string_view key,
                               std::string fallback) {
    const auto it = context.args.find(key);
    if (it == context.args.end() || it->second.is_null()) return fallback;
    if (const std::string* value = it->second.if_string()) return *value;
    return fail(wrong_arg(context, key, "a string", it->second));
}

Result<std::unique_ptr<Scheduler>> make_simple_scheduler(const StageContext& context,
                                                         ComputeFn compute,
                                                         std::int64_t default_workers) {
    OMNI_TRY(std::int64_t workers, int_arg(context, "worker_threads", default_workers));
    if (workers < 1 || workers > 256) {
        return fail(ErrorCode::invalid_argument,
                    "stage '" + context.stage_name + "': arg 'worker_threads' must be in [1, 256]");
    }
    OMNI_TRY(bool inline_compute, bool_arg(context, "inline_compute", false));
    OMNI_TRY(auto scheduler,
             SimpleScheduler::create({.stage_name = context.stage_name,
                                      .compute = std::move(compute),
                                      .worker_threads = static_cast<std::size_t>(workers),
                                      .inline_when_idle = inline_compute,
                                      .tracer = context.tracer}));
    return std::unique_ptr<Scheduler>(std::move(scheduler));
}

}  // namespace omnirt::pipeline

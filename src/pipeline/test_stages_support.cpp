// Shared pieces of the test stages: typed args, the payload pattern, registration helpers.
#include <utility>

#include "pipeline/test_stages.h"

namespace omnirt::pipeline {
namespace {

Error wrong_arg(const StageContext& context, std::string_view key, std::string_view expected,
                const Value& value) {
    return Error{ErrorCode::invalid_argument,
                 "stage '" + context.stage_name + "': arg '" + std::string(key) + "' must be " +
                     std::string(expected) + ", got " + std::string(to_string(value.kind()))};
}

template <class T>
void fill_numeric(Tensor& tensor) {
    auto* out = reinterpret_cast<T*>(tensor.mutable_data());
    for (std::int64_t i = 0; i < tensor.numel(); ++i) out[i] = static_cast<T>(i % 251);
}

}  // namespace

Result<std::int64_t> int_arg(const StageContext& context, std::string_view key,
                             std::int64_t fallback) {
    const auto it = context.args.find(key);
    if (it == context.args.end() || it->second.is_null()) return fallback;
    if (const std::int64_t* value = it->second.if_int()) return *value;
    return fail(wrong_arg(context, key, "an integer", it->second));
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

Result<Tensor> make_pattern_tensor(std::size_t bytes, DType dtype) {
    const std::size_t element = element_size(dtype);
    if (bytes % element != 0) {
        return fail(ErrorCode::invalid_argument, "pattern tensor: " + std::to_string(bytes) +
                                                     " bytes is not a multiple of " +
                                                     std::string(to_string(dtype)) + "'s " +
                                                     std::to_string(element) + "-byte elements");
    }
    OMNI_TRY(Tensor tensor, Tensor::empty({static_cast<std::int64_t>(bytes / element)}, dtype));
    switch (dtype) {
        case DType::boolean: {
            auto* out = reinterpret_cast<bool*>(tensor.mutable_data());
            for (std::int64_t i = 0; i < tensor.numel(); ++i) out[i] = (i % 2) == 1;
            break;
        }
        case DType::u8:
            fill_numeric<std::uint8_t>(tensor);
            break;
        case DType::i8:
            fill_numeric<std::int8_t>(tensor);
            break;
        case DType::i16:
            fill_numeric<std::int16_t>(tensor);
            break;
        case DType::i32:
            fill_numeric<std::int32_t>(tensor);
            break;
        case DType::i64:
            fill_numeric<std::int64_t>(tensor);
            break;
        case DType::f32:
            fill_numeric<float>(tensor);
            break;
        case DType::f64:
            fill_numeric<double>(tensor);
            break;
        case DType::f16:
        case DType::bf16: {
            std::byte* out = tensor.mutable_data();
            for (std::size_t k = 0; k < bytes; ++k)
                out[k] = static_cast<std::byte>((k * 7 + 3) & 0xff);
            break;
        }
    }
    return tensor;
}

namespace test_stages_detail {

Status add_if_absent(Registry& registry, FunctionKind kind, std::string name, RegistryEntry entry) {
    Status added = registry.add(kind, std::move(name), std::move(entry));
    if (!added && added.error().code != ErrorCode::already_exists) return added;
    return ok_status();
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

}  // namespace test_stages_detail

Status register_test_stages(Registry& registry) {
    OMNI_RETURN_IF_ERROR(test_stages_detail::register_basic_stages(registry));
    OMNI_RETURN_IF_ERROR(test_stages_detail::register_stream_stages(registry));
    return test_stages_detail::register_functions(registry);
}

}  // namespace omnirt::pipeline

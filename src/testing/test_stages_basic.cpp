// Non-streaming test stages: identity, arithmetic, sleep, fail, tensor_producer, crash.
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "testing/test_stages_internal.h"

namespace omnirt::testing {
namespace {

StagePayload with_data(const StagePayload& input, Value data) {
    return StagePayload{
        .request_id = input.request_id, .request = input.request, .data = std::move(data)};
}

// True when request.params[key] is the string `stage_name`.
bool param_names_stage(const StagePayload& input, std::string_view key,
                       const std::string& stage_name) {
    const Value* value = input.request.params.find(key);
    return value != nullptr && value->is_string() && value->as_string() == stage_name;
}

// x * scale + offset for the arithmetic stage.
struct Affine {
    double scale = 1;
    double offset = 0;
    // Both coefficients were ints: ints stay ints.
    std::optional<std::pair<std::int64_t, std::int64_t>> integral;

    template <class T>
    Result<Value> apply_tensor(const Tensor& input) const {
        OMNI_TRY(Tensor source, input.contiguous());
        OMNI_TRY(Tensor out, Tensor::empty(source.shape(), source.dtype()));
        const T* in = source.data_as<T>();
        T* result = reinterpret_cast<T*>(out.mutable_data());
        for (std::int64_t i = 0; i < source.numel(); ++i) {
            result[i] = static_cast<T>(in[i] * scale + offset);
        }
        return Value(std::move(out));
    }

    // nullopt: the value is not something the stage transforms.
    Result<std::optional<Value>> apply(const Value& value) const {
        if (const std::int64_t* x = value.if_int()) {
            if (integral) return Value(*x * integral->first + integral->second);
            return Value(static_cast<double>(*x) * scale + offset);
        }
        if (const double* x = value.if_float()) return Value(*x * scale + offset);
        const Tensor* tensor = value.if_tensor();
        if (tensor == nullptr) return std::optional<Value>();
        if (!tensor->defined() || !tensor->device().is_cpu()) {
            return fail(ErrorCode::invalid_argument,
                        "test.arithmetic: tensors must be defined host tensors");
        }
        if (tensor->dtype() == DType::f32) return apply_tensor<float>(*tensor);
        if (tensor->dtype() == DType::f64) return apply_tensor<double>(*tensor);
        return fail(ErrorCode::invalid_argument,
                    "test.arithmetic: tensors must be float32 or float64, got " +
                        std::string(to_string(tensor->dtype())));
    }
};

Result<std::unique_ptr<Scheduler>> identity_factory(const StageContext& context) {
    return make_simple_scheduler(
        context, [](const StagePayload& input, Emitter&) { return Result<StagePayload>(input); });
}

Result<std::unique_ptr<Scheduler>> arithmetic_factory(const StageContext& context) {
    Affine affine;
    OMNI_TRY(affine.scale, number_arg(context, "scale", 1));
    OMNI_TRY(affine.offset, number_arg(context, "offset", 0));
    const auto scale = context.args.find("scale");
    const auto offset = context.args.find("offset");
    const bool scale_int = scale == context.args.end() || scale->second.is_int();
    const bool offset_int = offset == context.args.end() || offset->second.is_int();
    if (scale_int && offset_int) {
        affine.integral = std::pair{static_cast<std::int64_t>(affine.scale),
                                    static_cast<std::int64_t>(affine.offset)};
    }
    return make_simple_scheduler(
        context, [affine](const StagePayload& input, Emitter&) -> Result<StagePayload> {
            if (const Map* map = input.data.if_map()) {
                Map out = *map;
                for (auto& [key, value] : out) {
                    OMNI_TRY(std::optional<Value> changed, affine.apply(value));
                    if (changed) value = std::move(*changed);
                }
                return with_data(input, Value(std::move(out)));
            }
            OMNI_TRY(std::optional<Value> changed, affine.apply(input.data));
            if (!changed) {
                return fail(ErrorCode::invalid_argument,
                            "test.arithmetic: data must be a number, a float tensor or a map, "
                            "got " +
                                std::string(to_string(input.data.kind())));
            }
            return with_data(input, std::move(*changed));
        });
}

Result<std::unique_ptr<Scheduler>> sleep_factory(const StageContext& context) {
    if (!context.args.contains("ms")) {
        return fail(ErrorCode::invalid_argument,
                    "stage '" + context.stage_name + "': test.sleep needs arg 'ms'");
    }
    OMNI_TRY(std::int64_t ms, int_arg(context, "ms", 0));
    if (ms < 0) {
        return fail(ErrorCode::invalid_argument,
                    "stage '" + context.stage_name + "': arg 'ms' must not be negative");
    }
    // A computation that waits would hold the stage's control IO thread, and with it the
    // shutdown and abort messages meant to end it.
    OMNI_TRY(bool inline_compute, bool_arg(context, "inline_compute", false));
    if (inline_compute) {
        return fail(ErrorCode::invalid_argument,
                    "stage '" + context.stage_name +
                        "': test.sleep waits, so it cannot take inline_compute (the wait would "
                        "hold the control messages that end it)");
    }
    return make_simple_scheduler(
        context, [ms](const StagePayload& input, Emitter& emit) -> Result<StagePayload> {
            std::int64_t wait = ms;
            if (const Value* param = input.request.params.find("sleep_ms")) {
                const std::int64_t* value = param->if_int();
                if (value == nullptr || *value < 0) {
                    return fail(ErrorCode::invalid_argument,
                                "test.sleep: request param 'sleep_ms' must be a non-negative "
                                "integer");
                }
                wait = *value;
            }
            if (emit.wait_for_abort(std::chrono::milliseconds(wait))) {
                return fail(ErrorCode::aborted, "test.sleep: aborted");
            }
            return input;
        });
}

Result<std::unique_ptr<Scheduler>> fail_factory(const StageContext& context) {
    OMNI_TRY(bool always, bool_arg(context, "always", false));
    OMNI_TRY(std::string message, string_arg(context, "message", "injected failure"));
    return make_simple_scheduler(context,
                                 [always, message, stage = context.stage_name](
                                     const StagePayload& input, Emitter&) -> Result<StagePayload> {
                                     if (always || param_names_stage(input, "fail_stage", stage)) {
                                         return fail(ErrorCode::internal, "test.fail: " + message);
                                     }
                                     return input;
                                 });
}

Result<std::unique_ptr<Scheduler>> crash_factory(const StageContext& context) {
    OMNI_TRY(bool always, bool_arg(context, "always", false));
    // For crash loops: a test creates the file, and every later incarnation dies while starting.
    OMNI_TRY(std::string crash_at_start, string_arg(context, "crash_at_start_if_exists", ""));
    if (!crash_at_start.empty() && std::filesystem::exists(crash_at_start)) std::_Exit(78);
    return make_simple_scheduler(context,
                                 [always, stage = context.stage_name](
                                     const StagePayload& input, Emitter&) -> Result<StagePayload> {
                                     if (always || param_names_stage(input, "crash_stage", stage))
                                         std::_Exit(77);
                                     return input;
                                 });
}

Result<std::unique_ptr<Scheduler>> tensor_producer_factory(const StageContext& context) {
    OMNI_TRY(std::int64_t bytes, int_arg(context, "bytes", 0));
    OMNI_TRY(std::string dtype_name, string_arg(context, "dtype", "uint8"));
    if (bytes < 0) {
        return fail(ErrorCode::invalid_argument,
                    "stage '" + context.stage_name + "': arg 'bytes' must not be negative");
    }
    auto dtype = parse_dtype(dtype_name);
    if (!dtype) return fail(dtype.error().with_context("stage '" + context.stage_name + "'"));
    OMNI_TRY(bool reuse, bool_arg(context, "reuse", false));
    // reuse: one read-only tensor made here and shared by every request, so a benchmark measures
    // the runtime and not the pattern fill.
    std::optional<Tensor> shared;
    if (reuse) {
        OMNI_TRY(Tensor made, make_pattern_tensor(static_cast<std::size_t>(bytes), *dtype));
        auto owner = made.storage();
        auto read_only = Storage::wrap(
            owner->data(), owner->nbytes(), owner->device(), [owner](std::byte*) {},
            /*read_only=*/true);
        OMNI_TRY(shared, Tensor::from_storage(read_only, made.dtype(), made.shape()));
    }
    return make_simple_scheduler(
        context,
        [bytes, dtype = *dtype, shared](const StagePayload& input,
                                        Emitter&) -> Result<StagePayload> {
            if (shared && input.request.params.find("payload_bytes") == nullptr) {
                return with_data(input,
                                 Value(Map{{"tensor", Value(*shared)}, {"input", input.data}}));
            }
            std::int64_t size = bytes;
            if (const Value* param = input.request.params.find("payload_bytes")) {
                const std::int64_t* value = param->if_int();
                if (value == nullptr || *value < 0) {
                    return fail(ErrorCode::invalid_argument,
                                "test.tensor_producer: request param 'payload_bytes' must be a "
                                "non-negative integer");
                }
                size = *value;
            }
            OMNI_TRY(Tensor tensor, make_pattern_tensor(static_cast<std::size_t>(size), dtype));
            return with_data(
                input, Value(Map{{"tensor", Value(std::move(tensor))}, {"input", input.data}}));
        });
}

}  // namespace

namespace test_stages_detail {

Status register_basic_stages(Registry& registry) {
    struct Builtin {
        const char* name;
        StageFactory factory;
        const char* description;
    };
    const Builtin builtins[] = {
        {"test.identity", identity_factory, "result data = input data"},
        {"test.arithmetic", arithmetic_factory,
         "numbers and float tensors in data become x * scale + offset"},
        {"test.sleep", sleep_factory,
         "waits arg ms / param sleep_ms (an abort ends the wait), then identity"},
        {"test.fail", fail_factory,
         "fails when arg always or request param fail_stage names the stage"},
        {"test.tensor_producer", tensor_producer_factory,
         "data = {tensor: a pattern tensor of arg bytes / param payload_bytes, input}"},
        {"test.crash", crash_factory,
         "exits the process with status 77 when arg always or param crash_stage names the stage"},
    };
    for (const Builtin& builtin : builtins) {
        OMNI_RETURN_IF_ERROR(registry.add_if_absent(
            FunctionKind::factory, builtin.name,
            RegistryEntry{.callable = builtin.factory, .description = builtin.description}));
    }
    return ok_status();
}

}  // namespace test_stages_detail

}  // namespace omnirt::testing

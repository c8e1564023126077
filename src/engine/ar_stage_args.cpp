#include "engine/ar_stage_args.h"

#include <cstdint>

#include "pipeline/stage_args.h"

namespace omnirt::engine {

Result<SamplingParams> parse_sampling_args(const pipeline::StageContext& context,
                                           const std::string& who, const std::string& prefix,
                                           const SamplingArgDefaults& defaults,
                                           std::int64_t max_tokens) {
    OMNI_TRY(double temperature,
             pipeline::number_arg(context, prefix + "temperature", defaults.temperature));
    OMNI_TRY(std::int64_t top_k,
             pipeline::int_arg_in(context, who, prefix + "top_k", defaults.top_k, -1, 1 << 20));
    OMNI_TRY(double top_p, pipeline::number_arg(context, prefix + "top_p", defaults.top_p));
    Map layer{{"temperature", Value(temperature)},
              {"top_k", Value(top_k)},
              {"top_p", Value(top_p)},
              {"max_tokens", Value(max_tokens)}};
    if (defaults.repetition_penalty) {
        OMNI_TRY(double penalty, pipeline::number_arg(context, prefix + "repetition_penalty",
                                                      *defaults.repetition_penalty));
        layer.emplace("repetition_penalty", Value(penalty));
    }
    SamplingParams sampling;
    OMNI_RETURN_IF_ERROR(apply_sampling_layer(Value(std::move(layer)), who + " args", sampling));
    return sampling;
}

Result<ArStageArgs> parse_ar_stage_args(const pipeline::StageContext& context,
                                        const std::string& who,
                                        const ArStageArgDefaults& defaults) {
    ArStageArgs out;
    OMNI_TRY(out.model_path, pipeline::string_arg(context, "model_path", ""));
    if (out.model_path.empty()) {
        return fail(ErrorCode::invalid_argument, who + ": arg 'model_path' is required");
    }
    OMNI_TRY(std::string dtype, pipeline::string_arg(context, "dtype", "float32"));
    if (dtype != "float32" && dtype != "bfloat16") {
        return fail(ErrorCode::invalid_argument,
                    who + ": arg 'dtype' must be float32 or bfloat16, got '" + dtype + "'");
    }
    out.dtype = dtype == "bfloat16" ? DType::bf16 : DType::f32;
    OMNI_TRY(out.block_size, pipeline::int_arg_in(context, who, "block_size", 16, 1, 1024));
    OMNI_TRY(out.max_total_tokens,
             pipeline::int_arg_in(context, who, "max_total_tokens", defaults.max_total_tokens,
                                  out.block_size, 1 << 30));
    OMNI_TRY(out.max_running_requests,
             pipeline::int_arg_in(context, who, "max_running_requests", 64, 1, 4096));
    OMNI_TRY(out.max_prefill_tokens, pipeline::int_arg_in(context, who, "max_prefill_tokens",
                                                          defaults.max_prefill_tokens, 1, 1 << 20));
    OMNI_TRY(out.max_tokens, pipeline::int_arg_in(context, who, defaults.max_tokens_arg,
                                                  defaults.max_tokens, 1, 1 << 20));
    OMNI_TRY(std::int64_t seed, pipeline::int_arg(context, "seed", 0));
    out.seed = static_cast<std::uint64_t>(seed);
    OMNI_TRY(out.load_format, pipeline::string_arg(context, "load_format", "auto"));
    OMNI_TRY(std::int64_t dummy_seed,
             pipeline::int_arg_in(context, who, "dummy_seed", 0, 0, INT64_MAX));
    out.dummy_seed = static_cast<std::uint64_t>(dummy_seed);
    OMNI_TRY(out.num_threads, pipeline::int_arg_in(context, who, "num_threads", 0, 0, 1024));
    OMNI_TRY(out.sampling,
             parse_sampling_args(context, who, "", defaults.sampling, out.max_tokens));
    return out;
}

}  // namespace omnirt::engine

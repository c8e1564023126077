#include "models/qwen3_omni/talker_stage.h"

#include <filesystem>

#include "engine/ar_scheduler.h"
#include "models/qwen3_omni/omni_config.h"
#include "models/qwen3_omni/omni_lookup.h"
#include "models/qwen3_omni/talker_model.h"
#include "models/qwen3_omni/talker_role.h"
#include "pipeline/stage_args.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::string_view kFactory = "qwen3_omni.talker";

Error invalid(const std::string& message) {
    return Error{ErrorCode::invalid_argument, std::string(kFactory) + ": " + message};
}

Result<engine::SamplingParams> talker_sampling(const pipeline::StageContext& context,
                                               const std::string& who) {
    OMNI_TRY(double temperature, pipeline::number_arg(context, "temperature", 0.9));
    OMNI_TRY(std::int64_t top_k, pipeline::int_arg_in(context, who, "top_k", 50, -1, 1 << 20));
    OMNI_TRY(double top_p, pipeline::number_arg(context, "top_p", 1.0));
    OMNI_TRY(double penalty, pipeline::number_arg(context, "repetition_penalty", 1.05));
    OMNI_TRY(std::int64_t max_frames,
             pipeline::int_arg_in(context, who, "max_frames", 4096, 1, 1 << 20));
    engine::SamplingParams sampling;
    Map layer{{"temperature", Value(temperature)},
              {"top_k", Value(top_k)},
              {"top_p", Value(top_p)},
              {"repetition_penalty", Value(penalty)},
              {"max_tokens", Value(max_frames)}};
    Status applied = engine::apply_sampling_layer(Value(std::move(layer)), who + " args", sampling);
    if (!applied) return fail(applied.error());
    return sampling;
}

}  // namespace

Result<std::unique_ptr<pipeline::Scheduler>> make_talker_stage(
    const pipeline::StageContext& context) {
    const std::string who = std::string(kFactory) + " stage '" + context.stage_name + "'";
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) return fail(invalid(who + ": arg 'model_path' is required"));
    OMNI_TRY(std::string dtype_name, pipeline::string_arg(context, "dtype", "float32"));
    if (dtype_name != "float32" && dtype_name != "bfloat16") {
        return fail(
            invalid(who + ": arg 'dtype' must be float32 or bfloat16, got '" + dtype_name + "'"));
    }
    const at::ScalarType dtype = dtype_name == "bfloat16" ? at::kBFloat16 : at::kFloat;
    OMNI_TRY(std::int64_t block_size,
             pipeline::int_arg_in(context, who, "block_size", 16, 1, 1024));
    OMNI_TRY(std::int64_t max_total,
             pipeline::int_arg_in(context, who, "max_total_tokens", 16384, block_size, 1 << 30));
    OMNI_TRY(std::int64_t max_running,
             pipeline::int_arg_in(context, who, "max_running_requests", 64, 1, 4096));
    OMNI_TRY(std::int64_t max_prefill,
             pipeline::int_arg_in(context, who, "max_prefill_tokens", 2048, 1, 1 << 20));
    OMNI_TRY(std::int64_t seed, pipeline::int_arg(context, "seed", 0));
    OMNI_TRY(std::string load_format, pipeline::string_arg(context, "load_format", "auto"));
    OMNI_TRY(std::int64_t dummy_seed,
             pipeline::int_arg_in(context, who, "dummy_seed", 0, 0, INT64_MAX));
    OMNI_TRY(std::int64_t num_threads,
             pipeline::int_arg_in(context, who, "num_threads", 0, 0, 1024));
    OMNI_TRY(engine::SamplingParams sampling, talker_sampling(context, who));
    torch_bridge::set_intra_op_threads(num_threads);

    auto weights = open_omni_weights(std::filesystem::path(model_path), load_format,
                                     dtype == at::kBFloat16 ? DType::bf16 : DType::f32,
                                     static_cast<std::uint64_t>(dummy_seed));
    if (!weights) return fail(weights.error().with_context(who));
    auto omni = parse_omni_config(weights->config);
    if (!omni) return fail(omni.error().with_context(who));
    auto config = parse_talker_config(*omni);
    if (!config) return fail(config.error().with_context(who));
    const at::Device device = torch_bridge::to_torch_device(context.device);
    auto talker = load_talker(*omni, *config, weights->lookup,
                              qwen3::Qwen3ModelOptions{.dtype = dtype, .device = device});
    if (!talker) return fail(talker.error().with_context(who));

    engine::SamplingParams depth;  // transformers' code predictor when sampling
    depth.top_k = 50;
    depth.top_p = 0.8;
    engine::ArEngineConfig engine_config{
        .stage_name = context.stage_name,
        .num_kv_blocks = max_total / block_size,
        .block_size = static_cast<std::int32_t>(block_size),
        .device = context.device,
        .max_running_requests = max_running,
        .max_prefill_tokens = max_prefill,
        .enable_prefix_cache = false,
        .default_sampling = sampling,
        .sampling_layers = engine::SamplingLayers::own,
        .depth_sampling = {depth},
        .eos_token_ids = {static_cast<std::int32_t>(config->codec.eos)},
        .stream_to_client = false,
        .stream_targets = context.stream_to,
        .accept_streams = true,
        .seed = static_cast<std::uint64_t>(seed),
        .tracer = context.tracer};
    const CodePredictor* predictor = talker->predictor.get();
    auto role = std::make_unique<TalkerRole>(
        *config, talker->inputs, predictor,
        TalkerRoleOptions{.stage_name = context.stage_name, .default_sampling = sampling});
    OMNI_TRY(auto scheduler,
             engine::ArScheduler::create(std::move(engine_config), std::move(talker->model),
                                         std::move(role), std::move(talker->predictor)));
    return std::unique_ptr<pipeline::Scheduler>(std::move(scheduler));
}

Status register_talker_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, std::string(kFactory),
        RegistryEntry{.callable = pipeline::StageFactory(make_talker_stage),
                      .injectable_args = {"model_path", "gpu_id"},
                      .description = "Qwen3-Omni talker + code predictor on the AR engine: the "
                                     "thinker's stream in, codec frames (16 codes per 80 ms) "
                                     "streamed to code2wav"});
}

}  // namespace omnirt::models::qwen3_omni

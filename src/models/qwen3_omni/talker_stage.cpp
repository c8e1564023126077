#include "models/qwen3_omni/talker_stage.h"

#include <filesystem>

#include "engine/ar_scheduler.h"
#include "engine/ar_stage_args.h"
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

}  // namespace

Result<std::unique_ptr<pipeline::Scheduler>> make_talker_stage(
    const pipeline::StageContext& context) {
    const std::string who = std::string(kFactory) + " stage '" + context.stage_name + "'";
    OMNI_TRY(engine::ArStageArgs args,
             engine::parse_ar_stage_args(
                 context, who,
                 {.max_total_tokens = 16384,
                  .max_prefill_tokens = 2048,
                  .max_tokens_arg = "max_frames",
                  .max_tokens = 4096,
                  .sampling = {
                      .temperature = 0.9, .top_k = 50, .top_p = 1.0, .repetition_penalty = 1.05}}));
    torch_bridge::set_intra_op_threads(args.num_threads);
    const at::ScalarType dtype = args.dtype == DType::bf16 ? at::kBFloat16 : at::kFloat;

    auto weights = open_omni_weights(std::filesystem::path(args.model_path), args.load_format,
                                     args.dtype, args.dummy_seed);
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
        .num_kv_blocks = args.num_kv_blocks(),
        .block_size = static_cast<std::int32_t>(args.block_size),
        .device = context.device,
        .max_running_requests = args.max_running_requests,
        .max_prefill_tokens = args.max_prefill_tokens,
        .enable_prefix_cache = false,
        .default_sampling = args.sampling,
        .sampling_layers = engine::SamplingLayers::own,
        .depth_sampling = {depth},
        .eos_token_ids = {static_cast<std::int32_t>(config->codec.eos)},
        .stream_to_client = false,
        .stream_targets = context.stream_to,
        .accept_streams = true,
        .seed = args.seed,
        .tracer = context.tracer};
    const CodePredictor* predictor = talker->predictor.get();
    auto role = std::make_unique<TalkerRole>(
        *config, talker->inputs, predictor,
        TalkerRoleOptions{.stage_name = context.stage_name, .default_sampling = args.sampling});
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

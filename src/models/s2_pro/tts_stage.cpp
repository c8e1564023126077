#include "models/s2_pro/tts_stage.h"

#include <filesystem>
#include <map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dummy.h"
#include "engine/ar_scheduler.h"
#include "engine/ar_stage_args.h"
#include "models/s2_pro/tts_role.h"
#include "models/s2_pro/weights.h"
#include "pipeline/stage_args.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::string_view kFactory = "s2_pro.tts";

Error invalid(const std::string& message) {
    return Error{ErrorCode::invalid_argument, std::string(kFactory) + ": " + message};
}

// The config and a lookup of fish tensor names: the checkpoint's (auto) or seeded dummy
// tensors of the config's shapes (dummy; only config.json is read).
struct Weights {
    S2ProConfig config;
    qwen3::WeightLookup lookup;
};

Result<Weights> open_weights(const std::filesystem::path& directory, const std::string& format,
                             DType dtype, std::uint64_t seed) {
    if (format == "dummy") {
        OMNI_TRY(nlohmann::json json,
                 checkpoint::read_json_file(directory / checkpoint::kConfigFile));
        auto config = parse_s2_pro_config(json);
        if (!config) return fail(config.error().with_context((directory / "config.json").string()));
        auto specs = std::make_shared<std::map<std::string, checkpoint::TensorSpec, std::less<>>>();
        for (checkpoint::TensorSpec& spec : s2_pro_tensor_specs(*config, dtype)) {
            std::string name = spec.name;
            specs->emplace(std::move(name), std::move(spec));
        }
        return Weights{.config = *config,
                       .lookup = [specs, seed](const std::string& name) -> Result<Tensor> {
                           auto it = specs->find(name);
                           if (it == specs->end()) {
                               return fail(ErrorCode::not_found, "no dummy tensor '" + name + "'");
                           }
                           return checkpoint::dummy_tensor(it->second, {.seed = seed});
                       }};
    }
    if (format != "auto" && format != "safetensors") {
        return fail(invalid("arg 'load_format' must be auto or dummy, got '" + format + "'"));
    }
    OMNI_TRY(std::unique_ptr<checkpoint::Checkpoint> opened,
             checkpoint::Checkpoint::open(directory));
    std::shared_ptr<const checkpoint::Checkpoint> shared(std::move(opened));
    OMNI_TRY(S2ProConfig config, load_s2_pro_config(*shared));
    OMNI_RETURN_IF_ERROR(check_s2_pro_checkpoint(config, *shared));
    return Weights{.config = config,
                   .lookup = [shared](const std::string& name) { return shared->tensor(name); }};
}

}  // namespace

Result<std::unique_ptr<pipeline::Scheduler>> make_tts_stage(const pipeline::StageContext& context) {
    const std::string who = std::string(kFactory) + " stage '" + context.stage_name + "'";
    // The sampling defaults are fish-speech's HTTP defaults (docs/models/s2_pro.md).
    const engine::ArStageArgDefaults defaults{
        .max_total_tokens = 32768,
        .max_prefill_tokens = 8192,
        .max_tokens_arg = "max_new_tokens",
        .max_tokens = 1024,
        .sampling = {.temperature = 0.8, .top_k = 30, .top_p = 0.8}};
    OMNI_TRY(engine::ArStageArgs args, engine::parse_ar_stage_args(context, who, defaults));
    OMNI_TRY(
        engine::SamplingParams depth,
        engine::parse_sampling_args(context, who, "depth_", defaults.sampling, args.max_tokens));
    const at::ScalarType dtype = args.dtype == DType::bf16 ? at::kBFloat16 : at::kFloat;

    auto weights = open_weights(std::filesystem::path(args.model_path), args.load_format,
                                args.dtype, args.dummy_seed);
    if (!weights) return fail(weights.error().with_context(who));
    torch_bridge::set_intra_op_threads(
        torch_bridge::intra_op_threads_for(args.num_threads, weights->config.text.dim));
    const at::Device device = torch_bridge::to_torch_device(context.device);
    auto model = load_s2_pro_model(weights->config, weights->lookup, dtype, device);
    if (!model) return fail(model.error().with_context(who));

    engine::ArEngineConfig engine_config{
        .stage_name = context.stage_name,
        .num_kv_blocks = args.num_kv_blocks(),
        .block_size = static_cast<std::int32_t>(args.block_size),
        .device = context.device,
        .max_running_requests = args.max_running_requests,
        .max_prefill_tokens = args.max_prefill_tokens,
        .enable_prefix_cache = true,
        .default_sampling = args.sampling,
        .depth_sampling = {depth},
        .eos_token_ids = {static_cast<std::int32_t>(weights->config.ids.im_end)},
        // Frames go to the stage's stream targets (a vocoder); a stage without any (a bench, a
        // codes-only pipeline) streams them to the client.
        .stream_to_client = context.stream_to.empty(),
        .stream_targets = context.stream_to,
        .seed = args.seed,
        .tracer = context.tracer};
    auto role = std::make_unique<S2ProRole>(model->embedder);
    OMNI_TRY(auto scheduler,
             engine::ArScheduler::create(std::move(engine_config), std::move(model->slow),
                                         std::move(role), std::move(model->fast)));
    return std::unique_ptr<pipeline::Scheduler>(std::move(scheduler));
}

Status register_tts_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, std::string(kFactory),
        RegistryEntry{.callable = pipeline::StageFactory(make_tts_stage),
                      .injectable_args = {"model_path", "gpu_id"},
                      .description = "S2-Pro slow AR + fast AR on the AR engine: prompt ids with "
                                     "reference codes in, codec frames (10 codes per 46 ms) out"});
}

}  // namespace omnirt::models::s2_pro

#include "models/s2_pro/tts_stage.h"

#include <filesystem>
#include <map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dummy.h"
#include "engine/ar_scheduler.h"
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

Result<engine::SamplingParams> sampling_args(const pipeline::StageContext& context,
                                             const std::string& who, const std::string& prefix,
                                             std::int64_t max_tokens) {
    OMNI_TRY(double temperature, pipeline::number_arg(context, prefix + "temperature", 0.8));
    OMNI_TRY(std::int64_t top_k,
             pipeline::int_arg_in(context, who, prefix + "top_k", 30, -1, 1 << 20));
    OMNI_TRY(double top_p, pipeline::number_arg(context, prefix + "top_p", 0.8));
    engine::SamplingParams sampling;
    Map layer{{"temperature", Value(temperature)},
              {"top_k", Value(top_k)},
              {"top_p", Value(top_p)},
              {"max_tokens", Value(max_tokens)}};
    OMNI_RETURN_IF_ERROR(
        engine::apply_sampling_layer(Value(std::move(layer)), who + " args", sampling));
    return sampling;
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
             pipeline::int_arg_in(context, who, "max_total_tokens", 32768, block_size, 1 << 30));
    OMNI_TRY(std::int64_t max_running,
             pipeline::int_arg_in(context, who, "max_running_requests", 64, 1, 4096));
    OMNI_TRY(std::int64_t max_prefill,
             pipeline::int_arg_in(context, who, "max_prefill_tokens", 8192, 1, 1 << 20));
    OMNI_TRY(std::int64_t max_new,
             pipeline::int_arg_in(context, who, "max_new_tokens", 1024, 1, 1 << 20));
    OMNI_TRY(std::int64_t seed, pipeline::int_arg(context, "seed", 0));
    OMNI_TRY(std::string load_format, pipeline::string_arg(context, "load_format", "auto"));
    OMNI_TRY(std::int64_t dummy_seed,
             pipeline::int_arg_in(context, who, "dummy_seed", 0, 0, INT64_MAX));
    OMNI_TRY(std::int64_t num_threads,
             pipeline::int_arg_in(context, who, "num_threads", 0, 0, 1024));
    OMNI_TRY(engine::SamplingParams sampling, sampling_args(context, who, "", max_new));
    OMNI_TRY(engine::SamplingParams depth, sampling_args(context, who, "depth_", max_new));
    torch_bridge::set_intra_op_threads(num_threads);

    auto weights = open_weights(std::filesystem::path(model_path), load_format,
                                dtype == at::kBFloat16 ? DType::bf16 : DType::f32,
                                static_cast<std::uint64_t>(dummy_seed));
    if (!weights) return fail(weights.error().with_context(who));
    const at::Device device = torch_bridge::to_torch_device(context.device);
    auto model = load_s2_pro_model(weights->config, weights->lookup, dtype, device);
    if (!model) return fail(model.error().with_context(who));

    engine::ArEngineConfig engine_config{
        .stage_name = context.stage_name,
        .num_kv_blocks = max_total / block_size,
        .block_size = static_cast<std::int32_t>(block_size),
        .device = context.device,
        .max_running_requests = max_running,
        .max_prefill_tokens = max_prefill,
        .enable_prefix_cache = true,
        .default_sampling = sampling,
        .depth_sampling = {depth},
        .eos_token_ids = {static_cast<std::int32_t>(weights->config.ids.im_end)},
        // Frames go to the stage's stream targets (a vocoder); a stage without any (a bench, a
        // codes-only pipeline) streams them to the client.
        .stream_to_client = context.stream_to.empty(),
        .stream_targets = context.stream_to,
        .seed = static_cast<std::uint64_t>(seed),
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

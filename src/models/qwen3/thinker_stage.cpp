#include "models/qwen3/thinker_stage.h"

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "engine/ar_scheduler.h"
#include "engine/text_role.h"
#include "models/qwen3/config.h"
#include "models/qwen3/prompt.h"
#include "models/qwen3/qwen3_model.h"
#include "models/qwen3/weight_source.h"
#include "pipeline/stage_args.h"
#include "text/tokenizer.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3 {
namespace {

constexpr std::string_view kFactoryName = "qwen3.thinker";
// Loads of at least this many bytes show progress on stderr (a test checkpoint loads quietly).
constexpr std::uint64_t kProgressMinBytes = 64ull << 20;

// `factory` ("qwen3.thinker", or a variant's) starts the message.
Error invalid(std::string_view factory, std::string message) {
    return Error{ErrorCode::invalid_argument, std::string(factory) + ": " + std::move(message)};
}

Result<at::ScalarType> parse_model_dtype(std::string_view factory, const std::string& name) {
    auto dtype = parse_dtype(name);
    if (!dtype || (*dtype != DType::f32 && *dtype != DType::bf16 && *dtype != DType::f16)) {
        return fail(invalid(
            factory, "arg 'dtype' must be float32, bfloat16 or float16, got '" + name + "'"));
    }
    return torch_bridge::to_scalar_type(*dtype);
}

// Sampling defaults and EOS ids of the checkpoint (generation_config.json when present).
struct GenerationDefaults {
    engine::SamplingParams sampling;
    std::vector<std::int32_t> eos_token_ids;
};

Result<GenerationDefaults> generation_defaults(std::string_view factory,
                                               const std::filesystem::path& directory,
                                               const Qwen3Config& config) {
    GenerationDefaults out;
    for (std::int64_t id : config.eos_token_ids)
        out.eos_token_ids.push_back(static_cast<std::int32_t>(id));
    const std::filesystem::path path = directory / "generation_config.json";
    if (!std::filesystem::exists(path)) return out;
    OMNI_TRY(nlohmann::json json, checkpoint::read_json_file(path));
    if (!json.is_object()) return fail(invalid(factory, path.string() + " is not a JSON object"));
    // The fields this engine reads, as a Value layer (the same validation as a request's).
    Map layer;
    for (const char* key : {"temperature", "top_p", "top_k", "repetition_penalty"}) {
        auto it = json.find(key);
        if (it == json.end()) continue;
        if (it->is_number_integer()) {
            layer.emplace(key, Value(it->get<std::int64_t>()));
        } else if (it->is_number()) {
            layer.emplace(key, Value(it->get<double>()));
        }
    }
    if (auto sample = json.find("do_sample");
        sample != json.end() && sample->is_boolean() && !sample->get<bool>()) {
        layer.insert_or_assign("temperature", Value(0));  // transformers: greedy
    }
    OMNI_RETURN_IF_ERROR(
        engine::apply_sampling_layer(Value(std::move(layer)), path.string(), out.sampling));
    if (auto eos = json.find("eos_token_id"); eos != json.end()) {
        out.eos_token_ids.clear();
        auto add = [&](const nlohmann::json& id) -> Status {
            if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
                id.get<std::int64_t>() >= config.vocab_size) {
                return fail(invalid(factory, path.string() + ": eos_token_id " + id.dump() +
                                                 " is not a token id of the model"));
            }
            out.eos_token_ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
            return ok_status();
        };
        if (eos->is_array()) {
            for (const auto& id : *eos) OMNI_RETURN_IF_ERROR(add(id));
        } else {
            OMNI_RETURN_IF_ERROR(add(*eos));
        }
    }
    return out;
}

checkpoint::ProgressCallback load_progress(std::string label) {
    auto show = checkpoint::terminal_progress(std::move(label));
    return [show](const checkpoint::Progress& progress) {
        if (progress.bytes_total >= kProgressMinBytes) show(progress);
    };
}

Result<std::int64_t> positive_arg(std::string_view factory, const pipeline::StageContext& context,
                                  std::string_view key, std::int64_t fallback) {
    OMNI_TRY(std::int64_t value, pipeline::int_arg(context, key, fallback));
    if (value <= 0) {
        return fail(invalid(factory, "stage '" + context.stage_name + "': arg '" +
                                         std::string(key) + "' must be positive, got " +
                                         std::to_string(value)));
    }
    return value;
}

}  // namespace

Result<std::unique_ptr<pipeline::Scheduler>> make_thinker_stage(
    const pipeline::StageContext& context) {
    return make_thinker_stage(context, ThinkerStageVariant{});
}

Result<std::unique_ptr<pipeline::Scheduler>> make_thinker_stage(
    const pipeline::StageContext& context, const ThinkerStageVariant& variant) {
    const std::string factory = variant.factory_name;
    const std::string who = "stage '" + context.stage_name + "'";
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) return fail(invalid(factory, who + ": arg 'model_path' is required"));
    OMNI_TRY(std::string dtype_name, pipeline::string_arg(context, "dtype", "float32"));
    OMNI_TRY(at::ScalarType dtype, parse_model_dtype(factory, dtype_name));
    OMNI_TRY(std::int64_t block_size, positive_arg(factory, context, "block_size", 16));
    OMNI_TRY(std::int64_t max_total_tokens,
             positive_arg(factory, context, "max_total_tokens", 16384));
    OMNI_TRY(std::int64_t max_running, positive_arg(factory, context, "max_running_requests", 256));
    OMNI_TRY(std::int64_t max_prefill, positive_arg(factory, context, "max_prefill_tokens", 2048));
    OMNI_TRY(bool prefix_cache, pipeline::bool_arg(context, "enable_prefix_cache", true));
    OMNI_TRY(bool enable_thinking, pipeline::bool_arg(context, "enable_thinking", true));
    OMNI_TRY(bool stream_hidden, pipeline::bool_arg(context, "stream_hidden", false));
    OMNI_TRY(std::int64_t seed, pipeline::int_arg(context, "seed", 0));
    OMNI_TRY(std::string load_format_name, pipeline::string_arg(context, "load_format", "auto"));
    auto load_format = parse_load_format(load_format_name);
    if (!load_format) return fail(invalid(factory, who + ": arg " + load_format.error().message));
    OMNI_TRY(std::int64_t dummy_seed, pipeline::int_arg(context, "dummy_seed", 0));
    OMNI_TRY(std::int64_t num_threads, pipeline::int_arg(context, "num_threads", 0));
    if (num_threads < 0 || num_threads > 1024) {
        return fail(invalid(factory, who +
                                         ": arg 'num_threads' must be 0 (every CPU) to 1024, got " +
                                         std::to_string(num_threads)));
    }
    OMNI_TRY(std::int64_t tp_timeout_s, positive_arg(factory, context, "tp_timeout_s", 300));
    if (block_size > 1024 || max_total_tokens < block_size) {
        return fail(invalid(factory, who + ": arg 'block_size' must be at most 1024 and at most "
                                           "max_total_tokens"));
    }

    // Before the model loads (conversions run in parallel) and the engine thread starts.
    torch_bridge::set_intra_op_threads(num_threads);
    const std::filesystem::path directory(model_path);
    const bool dummy = *load_format == LoadFormat::dummy;
    OMNI_TRY(DType weight_dtype, torch_bridge::from_scalar_type(dtype));
    OMNI_TRY(std::unique_ptr<WeightSource> weights,
             WeightSource::open(
                 directory, {.format = *load_format,
                             .dummy_dtype = weight_dtype,
                             .dummy_init = {.seed = static_cast<std::uint64_t>(dummy_seed)},
                             .progress = load_progress(variant.factory_name + " " + who + ": " +
                                                       (dummy ? "dummy weights for " : "loading ") +
                                                       model_path),
                             .config_pointer = variant.config_pointer,
                             .prefix = variant.weight_prefix}));
    const Qwen3Config& config = weights->config();
    OMNI_TRY(GenerationDefaults defaults, generation_defaults(factory, directory, config));
    // Dummy weights need no tokenizer when prompts come as data.input_ids.
    std::shared_ptr<const text::Tokenizer> tokenizer;
    const std::filesystem::path tokenizer_path = directory / "tokenizer.json";
    if (!dummy || std::filesystem::exists(tokenizer_path)) {
        OMNI_TRY(tokenizer, text::Tokenizer::from_file(tokenizer_path.string()));
    }
    // Tensor parallelism: this rank's weight shard; the group connects on the engine thread.
    std::shared_ptr<engine::C10dTpGroup> tp_group;
    if (context.tp_size > 1) {
        OMNI_TRY(tp_group, engine::C10dTpGroup::create(
                               {.name = who,
                                .rank = context.tp_rank,
                                .size = context.tp_size,
                                .rendezvous = context.tp_rendezvous,
                                .listen_host = context.node_address,
                                .device = torch_bridge::to_torch_device(context.device),
                                .timeout = std::chrono::seconds(tp_timeout_s)}));
    }
    const at::Device device = torch_bridge::to_torch_device(context.device);
    std::unique_ptr<RotaryEmbedding> rotary;
    if (variant.rotary) {
        OMNI_TRY(rotary, variant.rotary(config, device));
    }
    OMNI_TRY(std::unique_ptr<Qwen3Model> model,
             Qwen3Model::create(
                 config, [&weights](const std::string& name) { return weights->tensor(name); },
                 Qwen3ModelOptions{.dtype = dtype,
                                   .device = device,
                                   .weight_prefix = variant.weight_prefix,
                                   .rotary = std::move(rotary),
                                   .tensor_parallel = tp_group}));
    weights->finish();

    // Without a tokenizer no id has text (size 0).
    const auto tokenizer_size =
        tokenizer ? static_cast<std::int64_t>(tokenizer->vocab_size()) : std::int64_t{0};
    engine::ArEngineConfig engine_config{
        .stage_name = context.stage_name,
        .num_kv_blocks = max_total_tokens / block_size,
        .block_size = static_cast<std::int32_t>(block_size),
        .device = context.device,
        .max_running_requests = max_running,
        .max_prefill_tokens = max_prefill,
        .enable_prefix_cache = prefix_cache,
        .default_sampling = defaults.sampling,
        .eos_token_ids = defaults.eos_token_ids,
        // Behind a decode stage (configs/qwen3_chat.yaml) only the stream targets get tokens.
        .stream_to_client = context.terminal,
        .stream_targets = context.stream_to,
        .seed = static_cast<std::uint64_t>(seed),
        .tracer = context.tracer,
        .lockstep = tp_group};
    auto role = std::make_unique<engine::TextRole>(engine::TextRoleOptions{
        // Special tokens (<|im_end|>, pads) and ids past the tokenizer (the embedding is padded)
        // add no text.
        .detokenize = [tokenizer, tokenizer_size](std::int32_t id, std::string& out) -> Status {
            if (id >= tokenizer_size || tokenizer->is_special(id) || !tokenizer->id_to_token(id)) {
                return ok_status();
            }
            return tokenizer->append_token_bytes(id, out);
        },
        .prepare_input = [tokenizer, enable_thinking, who, tokenizer_path, factory](
                             const StagePayload& payload) -> Result<std::vector<std::int32_t>> {
            if (!tokenizer) {
                return fail(
                    invalid(factory, who + ": no " + tokenizer_path.string() +
                                         " (dummy weights without a tokenizer): send the prompt "
                                         "as data.input_ids"));
            }
            return qwen3_prompt_ids(payload.request, *tokenizer, enable_thinking, who);
        },
        .stream_targets_for = variant.stream_targets_for,
        .extend_setup = variant.extend_setup ? variant.extend_setup(config) : nullptr,
        .token_fields = variant.token_fields,
        .stream_hidden = stream_hidden});
    OMNI_TRY(auto scheduler, engine::ArScheduler::create(std::move(engine_config), std::move(model),
                                                         std::move(role)));
    return std::unique_ptr<pipeline::Scheduler>(std::move(scheduler));
}

Status register_qwen3_stages(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, std::string(kFactoryName),
        RegistryEntry{.callable = pipeline::StageFactory([](const pipeline::StageContext& context) {
                          return make_thinker_stage(context);
                      }),
                      .injectable_args = {"model_path", "gpu_id"},
                      .description = "Qwen3 text model on the AR engine: chat prompts tokenized, "
                                     "text streamed; data = {text, finish_reason, usage, "
                                     "output_ids}"});
}

}  // namespace omnirt::models::qwen3

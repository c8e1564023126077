#include "models/qwen3/family.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "models/qwen3/config.h"
#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3/prompt.h"
#include "models/qwen3/text_stages.h"
#include "models/qwen3/weights.h"

namespace omnirt::models::qwen3 {
namespace {

Result<models::MadeCheckpoint> make(const std::filesystem::path& directory,
                                    const CheckpointRequest& request) {
    const bool moe = request.moe || request.arch == "qwen3_moe";
    OMNI_TRY(qwen3::MadeCheckpoint made,
             make_checkpoint(directory, {.preset = request.preset,
                                         .moe = moe,
                                         .seed = request.seed,
                                         .dtype = request.dtype,
                                         .init_std = request.init_std,
                                         .max_shard_bytes = request.max_shard_bytes,
                                         .overwrite = request.overwrite,
                                         .progress = request.progress}));
    return models::MadeCheckpoint{.description = "qwen3 " + request.preset + (moe ? " moe" : ""),
                                  .weights = std::move(made.weights)};
}

Result<nlohmann::json> preset_config(const std::string& preset, const std::string& dtype) {
    OMNI_TRY(Qwen3Config config, qwen3_preset(preset));
    config.torch_dtype = dtype;
    return to_json(config);
}

std::string describe(const Qwen3Config& config) {
    std::string out = "qwen3 hidden " + std::to_string(config.hidden_size) + ", " +
                      std::to_string(config.num_hidden_layers) + " layers, " +
                      std::to_string(config.num_attention_heads) + "/" +
                      std::to_string(config.num_key_value_heads) + " heads x " +
                      std::to_string(config.head_dim) + ", vocab " +
                      std::to_string(config.vocab_size);
    if (config.num_experts > 0) {
        out += ", " + std::to_string(config.num_experts) + " experts top-" +
               std::to_string(config.num_experts_per_tok);
    }
    return out;
}

std::int64_t elements(const Shape& shape) {
    std::int64_t count = 1;
    for (std::int64_t size : shape) count *= size;
    return count;
}

}  // namespace

Result<DecodeFootprint> text_decode_footprint(const nlohmann::json& json) {
    OMNI_TRY(Qwen3Config config, parse_qwen3_config(json));
    DecodeFootprint footprint{.description = describe(config),
                              .vocab_size = config.vocab_size,
                              .embedding_row_elements = config.hidden_size,
                              .num_experts = static_cast<int>(config.num_experts),
                              .experts_per_token = static_cast<int>(config.num_experts_per_tok)};
    const std::string embed = "model.embed_tokens.weight";
    for (const auto& spec : tensor_specs(config, DType::bf16)) {
        const std::int64_t count = elements(spec.shape);
        footprint.parameters += count;
        if (spec.name == embed) continue;
        if (spec.name.find(".mlp.experts.") != std::string::npos) {
            footprint.expert_elements += count;
        } else {
            footprint.dense_elements += count;
        }
    }
    // A tied head is the embedding table, read whole by the logits of every step.
    if (config.tie_word_embeddings) {
        footprint.dense_elements += config.vocab_size * config.hidden_size;
    }
    footprint.kv_elements_per_token =
        2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim;
    return footprint;
}

Status register_family(FamilyRegistry& registry) {
    return registry.add(ModelFamily{
        .name = "qwen3",
        .arch_ids = {"qwen3", "qwen3_moe", "qwen3_omni_moe_text", "qwen3_vl_text",
                     "qwen3_vl_moe_text"},
        .architectures = {"Qwen3ForCausalLM", "Qwen3MoeForCausalLM"},
        .presets = qwen3_preset_names(),
        .serve_by_default = false,
        .make_checkpoint = make,
        .preset_config = preset_config,
        .decode_footprint = text_decode_footprint,
        .render_chat =
            [](const Value& messages, bool add_generation_prompt, const std::string& who) {
                return render_chat_prompt(messages, /*enable_thinking=*/true, add_generation_prompt,
                                          who);
            },
        .register_stages = [] { return register_qwen3_text_stages(); },
        .ar_stage_factory = "qwen3.thinker",
        .serve = {.pipeline_yaml = chat_pipeline_yaml(),
                  .plugin_file = "libomnirt_qwen3_plugin.so",
                  .plugin_env = "OMNIRT_QWEN3_PLUGIN",
                  .default_checkpoint_name = "qwen3-tiny-v1",
                  .default_preset = "tiny"}});
}

}  // namespace omnirt::models::qwen3

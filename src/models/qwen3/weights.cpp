#include "models/qwen3/weights.h"

namespace omnirt::models::qwen3 {

std::vector<checkpoint::ExpectedTensor> expected_tensors(const Qwen3Config& c,
                                                         std::string_view prefix) {
    std::vector<checkpoint::ExpectedTensor> out;
    const std::string model = std::string(prefix) + "model.";
    auto add = [&](std::string name, Shape shape, bool optional = false) {
        out.push_back({.name = std::move(name), .shape = std::move(shape), .optional = optional});
    };
    const std::int64_t h = c.hidden_size;
    add(model + "embed_tokens.weight", {c.vocab_size, h});
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const std::string layer = model + "layers." + std::to_string(i) + ".";
        const std::string attn = layer + "self_attn.";
        add(attn + "q_proj.weight", {c.q_size(), h});
        if (c.attention_bias) add(attn + "q_proj.bias", {c.q_size()});
        add(attn + "k_proj.weight", {c.kv_size(), h});
        if (c.attention_bias) add(attn + "k_proj.bias", {c.kv_size()});
        add(attn + "v_proj.weight", {c.kv_size(), h});
        if (c.attention_bias) add(attn + "v_proj.bias", {c.kv_size()});
        add(attn + "o_proj.weight", {h, c.q_size()});
        if (c.attention_bias) add(attn + "o_proj.bias", {h});
        add(attn + "q_norm.weight", {c.head_dim});
        add(attn + "k_norm.weight", {c.head_dim});
        const std::string mlp = layer + "mlp.";
        if (c.is_sparse_layer(i)) {
            const std::int64_t width = c.moe_intermediate_size;
            add(mlp + "gate.weight", {c.num_experts, h});
            for (std::int64_t e = 0; e < c.num_experts; ++e) {
                const std::string expert = mlp + "experts." + std::to_string(e) + ".";
                add(expert + "gate_proj.weight", {width, h});
                add(expert + "up_proj.weight", {width, h});
                add(expert + "down_proj.weight", {h, width});
            }
        } else {
            add(mlp + "gate_proj.weight", {c.intermediate_size, h});
            add(mlp + "up_proj.weight", {c.intermediate_size, h});
            add(mlp + "down_proj.weight", {h, c.intermediate_size});
        }
        add(layer + "input_layernorm.weight", {h});
        add(layer + "post_attention_layernorm.weight", {h});
    }
    add(model + "norm.weight", {h});
    // With tied embeddings transformers ignores a stored lm_head.weight; it may be there or not.
    add(std::string(prefix) + "lm_head.weight", {c.vocab_size, h}, c.tie_word_embeddings);
    return out;
}

std::vector<checkpoint::TensorSpec> tensor_specs(const Qwen3Config& config, DType dtype,
                                                 std::string_view prefix) {
    std::vector<checkpoint::TensorSpec> specs;
    for (checkpoint::ExpectedTensor& tensor : expected_tensors(config, prefix)) {
        if (tensor.optional) continue;
        const bool norm = tensor.name.ends_with("norm.weight");
        specs.push_back({.name = std::move(tensor.name),
                         .shape = std::move(tensor.shape),
                         .dtype = dtype,
                         .mean = norm ? 1.0 : 0.0});
    }
    return specs;
}

Status check_checkpoint(const Qwen3Config& config, const checkpoint::Checkpoint& checkpoint,
                        std::string_view prefix) {
    return checkpoint::check_tensors_status(checkpoint, expected_tensors(config, prefix), prefix);
}

Result<Qwen3Config> load_config(const checkpoint::Checkpoint& checkpoint) {
    auto config = parse_qwen3_config(checkpoint.config());
    if (!config) {
        return fail(config.error().with_context(
            (checkpoint.directory() / checkpoint::kConfigFile).string()));
    }
    return config;
}

}  // namespace omnirt::models::qwen3

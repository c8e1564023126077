#include "models/qwen3/qwen3_weights.h"

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3 {
namespace {

std::string shape_string(at::IntArrayRef shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ", ";
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

class Loader {
  public:
    Loader(const WeightLookup& lookup, const Qwen3WeightOptions& options)
        : lookup_(lookup), options_(options) {}

    // The tensor `name` (after the prefix) of shape `expected`, in the model dtype and device.
    Result<at::Tensor> get(const std::string& name, std::vector<std::int64_t> expected,
                           const std::string& shape_meaning) const {
        const std::string full_name = options_.prefix + name;
        auto tensor = lookup_(full_name);
        if (!tensor.has_value()) {
            return fail(tensor.error().with_context("qwen3 weight '" + full_name + "'"));
        }
        const DType dtype = tensor->dtype();
        if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16 &&
            dtype != DType::f64) {
            return fail(ErrorCode::invalid_argument,
                        "qwen3 weight '" + full_name + "' has a non-floating dtype");
        }
        const at::Tensor source = torch_bridge::to_torch(*tensor);
        if (source.sizes() != at::IntArrayRef(expected)) {
            return fail(ErrorCode::invalid_argument, "qwen3 weight '" + full_name + "' has shape " +
                                                         shape_string(source.sizes()) +
                                                         ", expected " + shape_string(expected) +
                                                         " (" + shape_meaning + ")");
        }
        // A view of the source when it already fits; libtorch never writes through it.
        return source.to(options_.device, options_.dtype).contiguous();
    }

  private:
    const WeightLookup& lookup_;
    const Qwen3WeightOptions& options_;
};

Status load_layer(const Qwen3Config& config, const Loader& loader, std::int64_t index,
                  Qwen3LayerWeights& layer) {
    const std::string prefix = "model.layers." + std::to_string(index) + ".";
    const std::int64_t hidden = config.hidden_size;
    const std::int64_t d = config.head_dim;
    const std::int64_t q_rows = config.q_size();
    const std::int64_t kv_rows = config.kv_size();

    OMNI_TRY(layer.input_layernorm,
             loader.get(prefix + "input_layernorm.weight", {hidden}, "hidden_size"));
    OMNI_TRY(layer.post_attention_layernorm,
             loader.get(prefix + "post_attention_layernorm.weight", {hidden}, "hidden_size"));
    OMNI_TRY(at::Tensor q, loader.get(prefix + "self_attn.q_proj.weight", {q_rows, hidden},
                                      "num_attention_heads * head_dim, hidden_size"));
    OMNI_TRY(at::Tensor k, loader.get(prefix + "self_attn.k_proj.weight", {kv_rows, hidden},
                                      "num_key_value_heads * head_dim, hidden_size"));
    OMNI_TRY(at::Tensor v, loader.get(prefix + "self_attn.v_proj.weight", {kv_rows, hidden},
                                      "num_key_value_heads * head_dim, hidden_size"));
    layer.qkv_proj = at::cat({q, k, v}, 0);
    OMNI_TRY(layer.o_proj, loader.get(prefix + "self_attn.o_proj.weight", {hidden, q_rows},
                                      "hidden_size, num_attention_heads * head_dim"));
    if (config.attention_bias) {
        OMNI_TRY(at::Tensor q_bias, loader.get(prefix + "self_attn.q_proj.bias", {q_rows},
                                               "num_attention_heads * head_dim"));
        OMNI_TRY(at::Tensor k_bias, loader.get(prefix + "self_attn.k_proj.bias", {kv_rows},
                                               "num_key_value_heads * head_dim"));
        OMNI_TRY(at::Tensor v_bias, loader.get(prefix + "self_attn.v_proj.bias", {kv_rows},
                                               "num_key_value_heads * head_dim"));
        layer.qkv_bias = at::cat({q_bias, k_bias, v_bias}, 0);
        OMNI_TRY(layer.o_bias,
                 loader.get(prefix + "self_attn.o_proj.bias", {hidden}, "hidden_size"));
    }
    OMNI_TRY(layer.q_norm, loader.get(prefix + "self_attn.q_norm.weight", {d}, "head_dim"));
    OMNI_TRY(layer.k_norm, loader.get(prefix + "self_attn.k_norm.weight", {d}, "head_dim"));

    if (!config.is_sparse_layer(index)) {
        const std::int64_t inner = config.intermediate_size;
        OMNI_TRY(at::Tensor gate, loader.get(prefix + "mlp.gate_proj.weight", {inner, hidden},
                                             "intermediate_size, hidden_size"));
        OMNI_TRY(at::Tensor up, loader.get(prefix + "mlp.up_proj.weight", {inner, hidden},
                                           "intermediate_size, hidden_size"));
        layer.gate_up_proj = at::cat({gate, up}, 0);
        OMNI_TRY(layer.down_proj, loader.get(prefix + "mlp.down_proj.weight", {hidden, inner},
                                             "hidden_size, intermediate_size"));
        return ok_status();
    }
    const std::int64_t inner = config.moe_intermediate_size;
    OMNI_TRY(layer.router, loader.get(prefix + "mlp.gate.weight", {config.num_experts, hidden},
                                      "num_experts, hidden_size"));
    layer.expert_gate_up.reserve(static_cast<std::size_t>(config.num_experts));
    layer.expert_down.reserve(static_cast<std::size_t>(config.num_experts));
    for (std::int64_t expert = 0; expert < config.num_experts; ++expert) {
        const std::string expert_prefix = prefix + "mlp.experts." + std::to_string(expert) + ".";
        OMNI_TRY(at::Tensor gate, loader.get(expert_prefix + "gate_proj.weight", {inner, hidden},
                                             "moe_intermediate_size, hidden_size"));
        OMNI_TRY(at::Tensor up, loader.get(expert_prefix + "up_proj.weight", {inner, hidden},
                                           "moe_intermediate_size, hidden_size"));
        layer.expert_gate_up.push_back(at::cat({gate, up}, 0));
        OMNI_TRY(at::Tensor down, loader.get(expert_prefix + "down_proj.weight", {hidden, inner},
                                             "hidden_size, moe_intermediate_size"));
        layer.expert_down.push_back(std::move(down));
    }
    return ok_status();
}

}  // namespace

Result<Qwen3Weights> load_qwen3_weights(const Qwen3Config& config, const WeightLookup& lookup,
                                        const Qwen3WeightOptions& options) {
    OMNI_RETURN_IF_ERROR(validate(config));
    if (config.hidden_act != "silu") {
        return fail(ErrorCode::unimplemented,
                    "qwen3: hidden_act '" + config.hidden_act + "' is not implemented (silu)");
    }
    if (config.use_sliding_window) {
        return fail(ErrorCode::unimplemented,
                    "qwen3: sliding-window attention (use_sliding_window) is not implemented");
    }
    if (options.dtype != at::kFloat && options.dtype != at::kBFloat16 &&
        options.dtype != at::kHalf) {
        return fail(
            ErrorCode::invalid_argument,
            std::string("qwen3: the model dtype must be float32, bfloat16 or float16, not ") +
                c10::toString(options.dtype));
    }
    if (options.dtype == at::kHalf && options.device.is_cpu()) {
        return fail(ErrorCode::unimplemented,
                    "qwen3: libtorch has no float16 matmul on the CPU; use bfloat16 or float32");
    }
    const Loader loader(lookup, options);
    Qwen3Weights weights;
    try {
        OMNI_TRY(weights.embed_tokens,
                 loader.get("model.embed_tokens.weight", {config.vocab_size, config.hidden_size},
                            "vocab_size, hidden_size"));
        weights.layers.resize(static_cast<std::size_t>(config.num_hidden_layers));
        for (std::int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
            OMNI_RETURN_IF_ERROR(
                load_layer(config, loader, layer, weights.layers[static_cast<std::size_t>(layer)]));
        }
        OMNI_TRY(weights.norm,
                 loader.get("model.norm.weight", {config.hidden_size}, "hidden_size"));
        if (config.tie_word_embeddings) {
            weights.lm_head = weights.embed_tokens;
        } else {
            OMNI_TRY(weights.lm_head,
                     loader.get("lm_head.weight", {config.vocab_size, config.hidden_size},
                                "vocab_size, hidden_size"));
        }
    } catch (const c10::Error& error) {
        return fail(
            ErrorCode::resource_exhausted,
            std::string("qwen3: cannot convert the weights: ") + error.what_without_backtrace());
    }
    return weights;
}

}  // namespace omnirt::models::qwen3

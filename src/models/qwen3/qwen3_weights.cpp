#include "models/qwen3/qwen3_weights.h"

#include <ATen/ATen.h>

#include <algorithm>
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

// Rows or columns [start, start + length) of dimension `dim`; dim < 0: the whole tensor.
struct Slice {
    int dim = -1;
    std::int64_t start = 0;
    std::int64_t length = 0;
};

class Loader {
  public:
    Loader(const WeightLookup& lookup, const Qwen3WeightOptions& options)
        : lookup_(lookup), options_(options) {}

    // The tensor `name` (after the prefix) of shape `expected`, in the model dtype and device;
    // only `slice` of it when given (the shape check is on the whole tensor).
    Result<at::Tensor> get(const std::string& name, std::vector<std::int64_t> expected,
                           const std::string& shape_meaning, Slice slice = {}) const {
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
        // A view of the source when it already fits (a row slice too); libtorch never writes
        // through it. A column slice is copied, reading only its own bytes of every row.
        const at::Tensor part =
            slice.dim < 0 ? source : source.narrow(slice.dim, slice.start, slice.length);
        return part.to(options_.device, options_.dtype).contiguous();
    }

  private:
    const WeightLookup& lookup_;
    const Qwen3WeightOptions& options_;
};

Status load_layer(const Qwen3Config& config, const Qwen3Shard& shard, const Loader& loader,
                  std::int64_t index, Qwen3LayerWeights& layer) {
    const std::string prefix = "model.layers." + std::to_string(index) + ".";
    const std::int64_t hidden = config.hidden_size;
    const std::int64_t d = config.head_dim;
    const std::int64_t q_rows = config.q_size();
    const std::int64_t kv_rows = config.kv_size();
    // This rank's rows of q / k / v (and of their biases) and columns of o.
    const Slice q_slice{.dim = 0, .start = shard.first_head * d, .length = shard.heads * d};
    const Slice kv_slice{.dim = 0, .start = shard.first_kv_head * d, .length = shard.kv_heads * d};
    const Slice o_slice{.dim = 1, .start = shard.first_head * d, .length = shard.heads * d};

    OMNI_TRY(layer.input_layernorm,
             loader.get(prefix + "input_layernorm.weight", {hidden}, "hidden_size"));
    OMNI_TRY(layer.post_attention_layernorm,
             loader.get(prefix + "post_attention_layernorm.weight", {hidden}, "hidden_size"));
    OMNI_TRY(at::Tensor q, loader.get(prefix + "self_attn.q_proj.weight", {q_rows, hidden},
                                      "num_attention_heads * head_dim, hidden_size", q_slice));
    OMNI_TRY(at::Tensor k, loader.get(prefix + "self_attn.k_proj.weight", {kv_rows, hidden},
                                      "num_key_value_heads * head_dim, hidden_size", kv_slice));
    OMNI_TRY(at::Tensor v, loader.get(prefix + "self_attn.v_proj.weight", {kv_rows, hidden},
                                      "num_key_value_heads * head_dim, hidden_size", kv_slice));
    layer.qkv_proj = at::cat({q, k, v}, 0);
    OMNI_TRY(layer.o_proj, loader.get(prefix + "self_attn.o_proj.weight", {hidden, q_rows},
                                      "hidden_size, num_attention_heads * head_dim", o_slice));
    if (config.attention_bias) {
        OMNI_TRY(at::Tensor q_bias, loader.get(prefix + "self_attn.q_proj.bias", {q_rows},
                                               "num_attention_heads * head_dim", q_slice));
        OMNI_TRY(at::Tensor k_bias, loader.get(prefix + "self_attn.k_proj.bias", {kv_rows},
                                               "num_key_value_heads * head_dim", kv_slice));
        OMNI_TRY(at::Tensor v_bias, loader.get(prefix + "self_attn.v_proj.bias", {kv_rows},
                                               "num_key_value_heads * head_dim", kv_slice));
        layer.qkv_bias = at::cat({q_bias, k_bias, v_bias}, 0);
        OMNI_TRY(layer.o_bias,
                 loader.get(prefix + "self_attn.o_proj.bias", {hidden}, "hidden_size"));
    }
    OMNI_TRY(layer.q_norm, loader.get(prefix + "self_attn.q_norm.weight", {d}, "head_dim"));
    OMNI_TRY(layer.k_norm, loader.get(prefix + "self_attn.k_norm.weight", {d}, "head_dim"));

    if (!config.is_sparse_layer(index)) {
        const std::int64_t inner = config.intermediate_size;
        const std::int64_t start = shard.rank * shard.intermediate;
        const Slice rows{.dim = 0, .start = start, .length = shard.intermediate};
        const Slice columns{.dim = 1, .start = start, .length = shard.intermediate};
        OMNI_TRY(at::Tensor gate, loader.get(prefix + "mlp.gate_proj.weight", {inner, hidden},
                                             "intermediate_size, hidden_size", rows));
        OMNI_TRY(at::Tensor up, loader.get(prefix + "mlp.up_proj.weight", {inner, hidden},
                                           "intermediate_size, hidden_size", rows));
        layer.gate_up_proj = at::cat({gate, up}, 0);
        OMNI_TRY(layer.down_proj, loader.get(prefix + "mlp.down_proj.weight", {hidden, inner},
                                             "hidden_size, intermediate_size", columns));
        return ok_status();
    }
    const std::int64_t inner = config.moe_intermediate_size;
    const std::int64_t start = shard.rank * shard.moe_intermediate;
    const Slice rows{.dim = 0, .start = start, .length = shard.moe_intermediate};
    const Slice columns{.dim = 1, .start = start, .length = shard.moe_intermediate};
    OMNI_TRY(layer.router, loader.get(prefix + "mlp.gate.weight", {config.num_experts, hidden},
                                      "num_experts, hidden_size"));
    layer.expert_gate_up.reserve(static_cast<std::size_t>(config.num_experts));
    layer.expert_down.reserve(static_cast<std::size_t>(config.num_experts));
    for (std::int64_t expert = 0; expert < config.num_experts; ++expert) {
        const std::string expert_prefix = prefix + "mlp.experts." + std::to_string(expert) + ".";
        OMNI_TRY(at::Tensor gate, loader.get(expert_prefix + "gate_proj.weight", {inner, hidden},
                                             "moe_intermediate_size, hidden_size", rows));
        OMNI_TRY(at::Tensor up, loader.get(expert_prefix + "up_proj.weight", {inner, hidden},
                                           "moe_intermediate_size, hidden_size", rows));
        layer.expert_gate_up.push_back(at::cat({gate, up}, 0));
        OMNI_TRY(at::Tensor down, loader.get(expert_prefix + "down_proj.weight", {hidden, inner},
                                             "hidden_size, moe_intermediate_size", columns));
        layer.expert_down.push_back(std::move(down));
    }
    const std::int64_t shared = config.shared_expert_intermediate_size;
    if (shared > 0) {
        const std::int64_t part = shared / shard.size;
        const Slice shared_rows{.dim = 0, .start = shard.rank * part, .length = part};
        const Slice shared_columns{.dim = 1, .start = shard.rank * part, .length = part};
        const std::string shared_prefix = prefix + "mlp.shared_expert.";
        OMNI_TRY(at::Tensor gate,
                 loader.get(shared_prefix + "gate_proj.weight", {shared, hidden},
                            "shared_expert_intermediate_size, hidden_size", shared_rows));
        OMNI_TRY(at::Tensor up,
                 loader.get(shared_prefix + "up_proj.weight", {shared, hidden},
                            "shared_expert_intermediate_size, hidden_size", shared_rows));
        layer.shared_gate_up = at::cat({gate, up}, 0);
        OMNI_TRY(layer.shared_down,
                 loader.get(shared_prefix + "down_proj.weight", {hidden, shared},
                            "hidden_size, shared_expert_intermediate_size", shared_columns));
        OMNI_TRY(layer.shared_gate, loader.get(prefix + "mlp.shared_expert_gate.weight",
                                               {1, hidden}, "1, hidden_size"));
    }
    return ok_status();
}

}  // namespace

Result<Qwen3Shard> qwen3_shard(const Qwen3Config& config, int rank, int size) {
    auto refuse = [&](const std::string& why) {
        return fail(ErrorCode::invalid_argument,
                    "qwen3: tensor parallel size " + std::to_string(size) + ": " + why);
    };
    if (size < 1 || rank < 0 || rank >= size) {
        return refuse("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(size) +
                      ")");
    }
    const std::int64_t heads = config.num_attention_heads;
    const std::int64_t kv = config.num_key_value_heads;
    if (heads % size != 0) {
        return refuse("it does not divide num_attention_heads " + std::to_string(heads));
    }
    Qwen3Shard shard{.rank = rank, .size = size};
    shard.heads = heads / size;
    shard.first_head = rank * shard.heads;
    if (kv % size == 0) {
        shard.kv_heads = kv / size;
        shard.first_kv_head = rank * shard.kv_heads;
    } else if (size % kv == 0) {
        // Fewer kv heads than ranks: each kv head serves size / kv ranks, whose query heads all
        // belong to its group.
        shard.kv_heads = 1;
        shard.first_kv_head = rank / (size / kv);
    } else {
        return refuse("num_key_value_heads " + std::to_string(kv) +
                      " must divide by it, or divide it (kv heads are then replicated)");
    }
    if (config.has_dense_layer()) {
        if (config.intermediate_size % size != 0) {
            return refuse("it does not divide intermediate_size " +
                          std::to_string(config.intermediate_size));
        }
        shard.intermediate = config.intermediate_size / size;
    }
    if (config.is_moe()) {
        if (config.moe_intermediate_size % size != 0) {
            return refuse("it does not divide moe_intermediate_size " +
                          std::to_string(config.moe_intermediate_size));
        }
        shard.moe_intermediate = config.moe_intermediate_size / size;
        if (config.shared_expert_intermediate_size % size != 0) {
            return refuse("it does not divide shared_expert_intermediate_size " +
                          std::to_string(config.shared_expert_intermediate_size));
        }
    }
    const std::int64_t vocab = config.vocab_size;
    shard.vocab_shard = (vocab + size - 1) / size;
    if ((size - 1) * shard.vocab_shard >= vocab) {
        return refuse("the vocabulary of " + std::to_string(vocab) +
                      " tokens leaves the last rank no row");
    }
    shard.vocab_begin = rank * shard.vocab_shard;
    shard.vocab_rows = std::min(shard.vocab_shard, vocab - shard.vocab_begin);
    return shard;
}

namespace {

// The decode kernels' packed copies (null where PackedWeight::pack declines: not bfloat16 on a
// CPU with the instructions, or packing off).
void pack_for_decode(Qwen3Weights& weights) {
    using engine::cpu::PackedWeight;
    for (Qwen3LayerWeights& layer : weights.layers) {
        layer.qkv_packed = PackedWeight::pack(layer.qkv_proj);
        layer.o_packed = PackedWeight::pack(layer.o_proj);
        layer.gate_up_packed = PackedWeight::pack(layer.gate_up_proj);
        layer.down_packed = PackedWeight::pack(layer.down_proj);
        layer.shared_gate_up_packed = PackedWeight::pack(layer.shared_gate_up);
        layer.shared_down_packed = PackedWeight::pack(layer.shared_down);
    }
    weights.lm_head_packed = PackedWeight::pack(weights.lm_head);
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
    OMNI_TRY(const Qwen3Shard shard, qwen3_shard(config, options.tp_rank, options.tp_size));
    const Slice vocab{.dim = 0, .start = shard.vocab_begin, .length = shard.vocab_rows};
    const Loader loader(lookup, options);
    Qwen3Weights weights;
    weights.shard = shard;
    try {
        OMNI_TRY(weights.embed_tokens,
                 loader.get(options.embed_name, {config.vocab_size, config.hidden_size},
                            "vocab_size, hidden_size", vocab));
        weights.layers.resize(static_cast<std::size_t>(config.num_hidden_layers));
        for (std::int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
            OMNI_RETURN_IF_ERROR(load_layer(config, shard, loader, layer,
                                            weights.layers[static_cast<std::size_t>(layer)]));
        }
        OMNI_TRY(weights.norm,
                 loader.get("model.norm.weight", {config.hidden_size}, "hidden_size"));
        if (config.tie_word_embeddings) {
            weights.lm_head = weights.embed_tokens;
        } else {
            OMNI_TRY(weights.lm_head,
                     loader.get(options.lm_head_name, {config.vocab_size, config.hidden_size},
                                "vocab_size, hidden_size", vocab));
        }
        pack_for_decode(weights);
    } catch (const c10::Error& error) {
        return fail(
            ErrorCode::resource_exhausted,
            std::string("qwen3: cannot convert the weights: ") + error.what_without_backtrace());
    }
    return weights;
}

}  // namespace omnirt::models::qwen3

#pragma once
// Qwen3Config: the text decoder hyper-parameters of Qwen3 (dense) and Qwen3-MoE, read from a
// Hugging Face config.json (transformers' Qwen3Config / Qwen3MoeConfig keys). Also reads the
// text_config of models built on the same decoder (qwen3_omni_moe_text, qwen3_vl_text, ...).
//
// Key spellings accepted for both transformers generations: `num_experts` or
// `num_local_experts`; `rope_theta` or `rope_parameters.rope_theta`; `torch_dtype` or `dtype`;
// `eos_token_id` as a number or a list. Absent keys take transformers' defaults, except the
// sizes a model cannot do without (see parse_qwen3_config()).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace omnirt::models::qwen3 {

struct Qwen3Config {
    std::string model_type = "qwen3";  // "qwen3", "qwen3_moe", or a qwen3-based text config
    std::int64_t vocab_size = 0;
    std::int64_t hidden_size = 0;
    std::int64_t intermediate_size = 0;  // dense MLP width (0: no dense layer in an MoE model)
    std::int64_t num_hidden_layers = 0;
    std::int64_t num_attention_heads = 0;
    std::int64_t num_key_value_heads = 0;
    std::int64_t head_dim = 0;  // heads * head_dim may differ from hidden_size (Qwen3-0.6B)
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    nlohmann::json rope_scaling;  // null when absent; kept as written (mrope, yarn, ...)
    std::int64_t max_position_embeddings = 32768;
    bool tie_word_embeddings = false;
    bool attention_bias = false;  // q/k/v/o projections carry biases
    std::string hidden_act = "silu";
    std::string torch_dtype;  // "bfloat16", ...; empty when absent
    bool use_sliding_window = false;
    std::optional<std::int64_t> sliding_window;
    std::int64_t max_window_layers = 0;
    std::optional<std::int64_t> bos_token_id;
    std::vector<std::int64_t> eos_token_ids;
    std::optional<std::int64_t> pad_token_id;

    // Mixture of experts; num_experts == 0 means dense.
    std::int64_t num_experts = 0;
    std::int64_t num_experts_per_tok = 0;
    std::int64_t moe_intermediate_size = 0;
    std::int64_t decoder_sparse_step = 1;
    bool norm_topk_prob = false;
    std::vector<std::int64_t> mlp_only_layers;  // layers that keep a dense MLP
    // A shared expert beside the routed ones (Qwen3-Omni's talker): a SwiGLU of this width whose
    // output is scaled by sigmoid(shared_expert_gate(x)) and added to the experts' sum; 0: none.
    std::int64_t shared_expert_intermediate_size = 0;

    [[nodiscard]] bool is_moe() const { return num_experts > 0; }
    // transformers' rule: sparse unless listed in mlp_only_layers, every decoder_sparse_step-th.
    [[nodiscard]] bool is_sparse_layer(std::int64_t layer) const;
    [[nodiscard]] bool has_dense_layer() const;
    [[nodiscard]] std::int64_t q_size() const { return num_attention_heads * head_dim; }
    [[nodiscard]] std::int64_t kv_size() const { return num_key_value_heads * head_dim; }
    // The weights' dtype named by torch_dtype (bf16 when absent); unimplemented for others.
    [[nodiscard]] Result<DType> weight_dtype() const;
};

// Parses a config.json object (or a nested text_config). Required: vocab_size, hidden_size,
// num_hidden_layers, num_attention_heads, and for MoE num_experts, num_experts_per_tok,
// moe_intermediate_size. Defaults: num_key_value_heads = num_attention_heads; head_dim = 128 for
// model_type qwen3 (transformers' default) else hidden_size / num_attention_heads. Wrong types
// and failed validate() are invalid_argument, naming the key.
[[nodiscard]] Result<Qwen3Config> parse_qwen3_config(const nlohmann::json& json);

// The rules a usable config obeys: positive sizes, heads divisible by kv heads, even head_dim,
// top-k within the experts, mlp_only_layers within the layers, token ids within the vocabulary.
[[nodiscard]] Status validate(const Qwen3Config& config);

// config.json as transformers writes it for this config (architectures, model_type, every key).
[[nodiscard]] nlohmann::json to_json(const Qwen3Config& config);

// Named presets: "tiny" (hidden 64, 2 layers, 4 heads, 2 kv heads, head_dim 16, intermediate 128,
// vocabulary of the tiny tokenizer; moe: 4 experts, top-2), "0.6b" and "8b" (Qwen/Qwen3-0.6B's
// and Qwen/Qwen3-8B's values; no MoE variant). not_found for other names.
[[nodiscard]] Result<Qwen3Config> qwen3_preset(std::string_view name, bool moe = false);
[[nodiscard]] std::vector<std::string> qwen3_preset_names();

}  // namespace omnirt::models::qwen3

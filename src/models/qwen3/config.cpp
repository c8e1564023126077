#include "models/qwen3/config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "checkpoint/config_json.h"
#include "models/qwen3/tiny_tokenizer.h"

namespace omnirt::models::qwen3 {
namespace {

using json = nlohmann::json;

// Bounds that keep expected_tensors() and friends small on hostile configs; far above any real
// Qwen3 model.
constexpr std::int64_t kMaxLayers = 4096;
constexpr std::int64_t kMaxExperts = 65536;

unexpected<Error> config_error(const std::string& message) {
    return checkpoint::config_error("Qwen3", message);
}

Result<std::optional<std::int64_t>> optional_int(const json& object, std::string_view key) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) return std::optional<std::int64_t>();
    if (!value->is_number_integer()) {
        return config_error(std::string(key) + " must be an integer, not " +
                            checkpoint::shown_json(*value));
    }
    if (value->is_number_unsigned() &&
        value->get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return config_error(std::string(key) + " is too large");
    }
    return std::optional<std::int64_t>(value->get<std::int64_t>());
}

Status read_int(const json& object, std::string_view key, std::int64_t& out, bool required) {
    OMNI_TRY(auto value, optional_int(object, key));
    if (value) {
        out = *value;
    } else if (required) {
        return config_error(std::string(key) + " is missing");
    }
    return ok_status();
}

Status read_number(const json& object, std::string_view key, double& out) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) return ok_status();
    if (!value->is_number()) {
        return config_error(std::string(key) + " must be a number, not " +
                            checkpoint::shown_json(*value));
    }
    out = value->get<double>();
    return ok_status();
}

Status read_bool(const json& object, std::string_view key, bool& out) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) return ok_status();
    if (!value->is_boolean()) {
        return config_error(std::string(key) + " must be true or false, not " +
                            checkpoint::shown_json(*value));
    }
    out = value->get<bool>();
    return ok_status();
}

Status read_string(const json& object, std::string_view key, std::string& out) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) return ok_status();
    if (!value->is_string()) {
        return config_error(std::string(key) + " must be a string, not " +
                            checkpoint::shown_json(*value));
    }
    out = value->get<std::string>();
    return ok_status();
}

Status read_int_list(const json& object, std::string_view key, std::vector<std::int64_t>& out,
                     bool allow_single) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) return ok_status();
    out.clear();
    if (allow_single && value->is_number_integer()) {
        out.push_back(value->get<std::int64_t>());
        return ok_status();
    }
    if (!value->is_array()) {
        return config_error(
            std::string(key) + " must be " +
            (allow_single ? "an integer or a list of integers" : "a list of integers") + ", not " +
            checkpoint::shown_json(*value));
    }
    for (const json& item : *value) {
        if (!item.is_number_integer()) {
            return config_error(std::string(key) + " must hold integers, not " +
                                checkpoint::shown_json(item));
        }
        out.push_back(item.get<std::int64_t>());
    }
    return ok_status();
}

bool is_qwen3_text_model(std::string_view type) {
    static constexpr std::string_view kTypes[] = {"qwen3",
                                                  "qwen3_moe",
                                                  "qwen3_omni_moe_text",
                                                  "qwen3_omni_moe_talker_text",
                                                  "qwen3_omni_moe_talker_code_predictor",
                                                  "qwen3_vl_text",
                                                  "qwen3_vl_moe_text"};
    return std::find(std::begin(kTypes), std::end(kTypes), type) != std::end(kTypes);
}

Status check_positive(std::string_view key, std::int64_t value) {
    if (value <= 0)
        return config_error(std::string(key) + " must be positive, not " + std::to_string(value));
    return ok_status();
}

}  // namespace

bool Qwen3Config::is_sparse_layer(std::int64_t layer) const {
    if (num_experts <= 0 || decoder_sparse_step <= 0) return false;
    if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) {
        return false;
    }
    return (layer + 1) % decoder_sparse_step == 0;
}

bool Qwen3Config::has_dense_layer() const {
    for (std::int64_t layer = 0; layer < num_hidden_layers; ++layer) {
        if (!is_sparse_layer(layer)) return true;
    }
    return false;
}

Result<DType> Qwen3Config::weight_dtype() const {
    if (torch_dtype.empty() || torch_dtype == "bfloat16") return DType::bf16;
    if (torch_dtype == "float16") return DType::f16;
    if (torch_dtype == "float32") return DType::f32;
    return fail(ErrorCode::unimplemented, "Qwen3 config: torch_dtype \"" + torch_dtype +
                                              "\" is not supported (bfloat16, float16, float32)");
}

Result<Qwen3Config> parse_qwen3_config(const json& object) {
    if (!object.is_object()) return config_error("the config must be a JSON object");
    Qwen3Config config;
    const json* type = checkpoint::json_member(object, "model_type");
    if (type != nullptr) {
        if (!type->is_string()) return config_error("model_type must be a string");
        config.model_type = type->get<std::string>();
        if (!is_qwen3_text_model(config.model_type)) {
            return config_error("model_type \"" + config.model_type +
                                "\" is not a Qwen3 text model (qwen3, qwen3_moe, "
                                "qwen3_omni_moe_text, qwen3_omni_moe_talker_text, "
                                "qwen3_omni_moe_talker_code_predictor, qwen3_vl_text, "
                                "qwen3_vl_moe_text)");
        }
    } else {
        config.model_type = checkpoint::json_member(object, "num_experts") ||
                                    checkpoint::json_member(object, "num_local_experts")
                                ? "qwen3_moe"
                                : "qwen3";
    }
    OMNI_RETURN_IF_ERROR(read_int(object, "vocab_size", config.vocab_size, true));
    OMNI_RETURN_IF_ERROR(read_int(object, "hidden_size", config.hidden_size, true));
    OMNI_RETURN_IF_ERROR(read_int(object, "intermediate_size", config.intermediate_size, false));
    OMNI_RETURN_IF_ERROR(read_int(object, "num_hidden_layers", config.num_hidden_layers, true));
    OMNI_RETURN_IF_ERROR(read_int(object, "num_attention_heads", config.num_attention_heads, true));
    config.num_key_value_heads = config.num_attention_heads;
    OMNI_RETURN_IF_ERROR(
        read_int(object, "num_key_value_heads", config.num_key_value_heads, false));
    OMNI_TRY(auto head_dim, optional_int(object, "head_dim"));
    if (head_dim) {
        config.head_dim = *head_dim;
    } else if (config.model_type == "qwen3") {
        config.head_dim = 128;
    } else {
        if (config.num_attention_heads <= 0 ||
            config.hidden_size % config.num_attention_heads != 0) {
            return config_error("head_dim is absent and hidden_size (" +
                                std::to_string(config.hidden_size) +
                                ") is not a multiple of num_attention_heads (" +
                                std::to_string(config.num_attention_heads) + ")");
        }
        config.head_dim = config.hidden_size / config.num_attention_heads;
    }
    OMNI_RETURN_IF_ERROR(read_number(object, "rms_norm_eps", config.rms_norm_eps));
    OMNI_RETURN_IF_ERROR(read_number(object, "rope_theta", config.rope_theta));
    if (const json* scaling = checkpoint::json_member(object, "rope_scaling")) {
        config.rope_scaling = *scaling;
    } else if (const json* parameters = checkpoint::json_member(object, "rope_parameters")) {
        if (!parameters->is_object()) return config_error("rope_parameters must be an object");
        config.rope_scaling = *parameters;
        if (!checkpoint::json_member(object, "rope_theta")) {
            OMNI_RETURN_IF_ERROR(read_number(*parameters, "rope_theta", config.rope_theta));
        }
    }
    OMNI_RETURN_IF_ERROR(
        read_int(object, "max_position_embeddings", config.max_position_embeddings, false));
    OMNI_RETURN_IF_ERROR(read_bool(object, "tie_word_embeddings", config.tie_word_embeddings));
    OMNI_RETURN_IF_ERROR(read_bool(object, "attention_bias", config.attention_bias));
    OMNI_RETURN_IF_ERROR(read_string(object, "hidden_act", config.hidden_act));
    OMNI_RETURN_IF_ERROR(read_string(object, "torch_dtype", config.torch_dtype));
    if (config.torch_dtype.empty())
        OMNI_RETURN_IF_ERROR(read_string(object, "dtype", config.torch_dtype));
    OMNI_RETURN_IF_ERROR(read_bool(object, "use_sliding_window", config.use_sliding_window));
    OMNI_TRY(config.sliding_window, optional_int(object, "sliding_window"));
    config.max_window_layers = config.num_hidden_layers;
    OMNI_RETURN_IF_ERROR(read_int(object, "max_window_layers", config.max_window_layers, false));
    OMNI_TRY(config.bos_token_id, optional_int(object, "bos_token_id"));
    OMNI_TRY(config.pad_token_id, optional_int(object, "pad_token_id"));
    OMNI_RETURN_IF_ERROR(read_int_list(object, "eos_token_id", config.eos_token_ids, true));

    const char* experts_key = checkpoint::json_member(object, "num_local_experts") &&
                                      !checkpoint::json_member(object, "num_experts")
                                  ? "num_local_experts"
                                  : "num_experts";
    OMNI_RETURN_IF_ERROR(
        read_int(object, experts_key, config.num_experts, config.model_type == "qwen3_moe"));
    if (config.num_experts > 0) {
        OMNI_RETURN_IF_ERROR(
            read_int(object, "num_experts_per_tok", config.num_experts_per_tok, true));
        OMNI_RETURN_IF_ERROR(
            read_int(object, "moe_intermediate_size", config.moe_intermediate_size, true));
        OMNI_RETURN_IF_ERROR(
            read_int(object, "decoder_sparse_step", config.decoder_sparse_step, false));
        OMNI_RETURN_IF_ERROR(read_bool(object, "norm_topk_prob", config.norm_topk_prob));
        OMNI_RETURN_IF_ERROR(
            read_int_list(object, "mlp_only_layers", config.mlp_only_layers, false));
        OMNI_RETURN_IF_ERROR(read_int(object, "shared_expert_intermediate_size",
                                      config.shared_expert_intermediate_size, false));
    }
    // router_aux_loss_coef, output_router_logits, initializer_range, use_cache, ...: training
    // only; ignored.
    OMNI_RETURN_IF_ERROR(validate(config));
    return config;
}

Status validate(const Qwen3Config& c) {
    OMNI_RETURN_IF_ERROR(check_positive("vocab_size", c.vocab_size));
    OMNI_RETURN_IF_ERROR(check_positive("hidden_size", c.hidden_size));
    OMNI_RETURN_IF_ERROR(check_positive("num_hidden_layers", c.num_hidden_layers));
    OMNI_RETURN_IF_ERROR(check_positive("num_attention_heads", c.num_attention_heads));
    OMNI_RETURN_IF_ERROR(check_positive("num_key_value_heads", c.num_key_value_heads));
    OMNI_RETURN_IF_ERROR(check_positive("head_dim", c.head_dim));
    OMNI_RETURN_IF_ERROR(check_positive("max_position_embeddings", c.max_position_embeddings));
    if (c.num_hidden_layers > kMaxLayers) {
        return config_error("num_hidden_layers " + std::to_string(c.num_hidden_layers) +
                            " exceeds the limit of " + std::to_string(kMaxLayers));
    }
    if (c.num_attention_heads % c.num_key_value_heads != 0) {
        return config_error("num_attention_heads (" + std::to_string(c.num_attention_heads) +
                            ") must be a multiple of num_key_value_heads (" +
                            std::to_string(c.num_key_value_heads) + ")");
    }
    if (c.head_dim % 2 != 0) {
        return config_error("head_dim (" + std::to_string(c.head_dim) +
                            ") must be even (rotary embeddings rotate halves)");
    }
    // Products used as tensor dimensions must not overflow.
    constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
    const std::initializer_list<std::pair<const char*, std::int64_t>> dimensions = {
        {"vocab_size", c.vocab_size},
        {"hidden_size", c.hidden_size},
        {"head_dim", c.head_dim},
        {"num_attention_heads", c.num_attention_heads},
        {"intermediate_size", c.intermediate_size},
        {"moe_intermediate_size", c.moe_intermediate_size}};
    for (auto [key, value] : dimensions) {
        if (value > kMaxDim) return config_error(std::string(key) + " is too large");
    }
    if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps)) {
        return config_error("rms_norm_eps must be a positive number");
    }
    if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
        return config_error("rope_theta must be a positive number");
    }
    if (c.num_experts < 0) return config_error("num_experts must not be negative");
    if (c.num_experts > 0) {
        if (c.num_experts > kMaxExperts) {
            return config_error("num_experts " + std::to_string(c.num_experts) +
                                " exceeds the limit of " + std::to_string(kMaxExperts));
        }
        OMNI_RETURN_IF_ERROR(check_positive("num_experts_per_tok", c.num_experts_per_tok));
        if (c.num_experts_per_tok > c.num_experts) {
            return config_error("num_experts_per_tok (" + std::to_string(c.num_experts_per_tok) +
                                ") exceeds num_experts (" + std::to_string(c.num_experts) + ")");
        }
        OMNI_RETURN_IF_ERROR(check_positive("moe_intermediate_size", c.moe_intermediate_size));
        OMNI_RETURN_IF_ERROR(check_positive("decoder_sparse_step", c.decoder_sparse_step));
        if (c.shared_expert_intermediate_size < 0) {
            return config_error("shared_expert_intermediate_size must not be negative");
        }
        for (std::int64_t layer : c.mlp_only_layers) {
            if (layer < 0 || layer >= c.num_hidden_layers) {
                return config_error("mlp_only_layers names layer " + std::to_string(layer) +
                                    " but layers are 0.." +
                                    std::to_string(c.num_hidden_layers - 1));
            }
        }
    }
    if (c.has_dense_layer())
        OMNI_RETURN_IF_ERROR(check_positive("intermediate_size", c.intermediate_size));
    auto check_token = [&](const char* key, std::int64_t id) -> Status {
        if (id < 0 || id >= c.vocab_size) {
            return config_error(std::string(key) + " " + std::to_string(id) +
                                " is outside the vocabulary (vocab_size " +
                                std::to_string(c.vocab_size) + ")");
        }
        return ok_status();
    };
    if (c.bos_token_id) OMNI_RETURN_IF_ERROR(check_token("bos_token_id", *c.bos_token_id));
    if (c.pad_token_id) OMNI_RETURN_IF_ERROR(check_token("pad_token_id", *c.pad_token_id));
    for (std::int64_t id : c.eos_token_ids) OMNI_RETURN_IF_ERROR(check_token("eos_token_id", id));
    return ok_status();
}

json to_json(const Qwen3Config& c) {
    const bool moe = c.is_moe();
    json out = {
        {"architectures", {moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"}},
        {"model_type", c.model_type},
        {"vocab_size", c.vocab_size},
        {"hidden_size", c.hidden_size},
        {"intermediate_size", c.intermediate_size},
        {"num_hidden_layers", c.num_hidden_layers},
        {"num_attention_heads", c.num_attention_heads},
        {"num_key_value_heads", c.num_key_value_heads},
        {"head_dim", c.head_dim},
        {"hidden_act", c.hidden_act},
        {"rms_norm_eps", c.rms_norm_eps},
        {"rope_theta", c.rope_theta},
        {"rope_scaling", c.rope_scaling},
        {"max_position_embeddings", c.max_position_embeddings},
        {"tie_word_embeddings", c.tie_word_embeddings},
        {"attention_bias", c.attention_bias},
        {"attention_dropout", 0.0},
        {"initializer_range", 0.02},
        {"use_cache", true},
        {"use_sliding_window", c.use_sliding_window},
        {"sliding_window", c.sliding_window ? json(*c.sliding_window) : json(nullptr)},
        {"max_window_layers", c.max_window_layers},
        {"torch_dtype", c.torch_dtype.empty() ? "bfloat16" : c.torch_dtype},
        {"transformers_version", "4.51.0"},
    };
    if (c.bos_token_id) out["bos_token_id"] = *c.bos_token_id;
    if (c.pad_token_id) out["pad_token_id"] = *c.pad_token_id;
    if (c.eos_token_ids.size() == 1) {
        out["eos_token_id"] = c.eos_token_ids[0];
    } else if (!c.eos_token_ids.empty()) {
        out["eos_token_id"] = c.eos_token_ids;
    }
    if (moe) {
        out["num_experts"] = c.num_experts;
        out["num_experts_per_tok"] = c.num_experts_per_tok;
        out["moe_intermediate_size"] = c.moe_intermediate_size;
        out["decoder_sparse_step"] = c.decoder_sparse_step;
        out["norm_topk_prob"] = c.norm_topk_prob;
        out["mlp_only_layers"] = c.mlp_only_layers;
        if (c.shared_expert_intermediate_size > 0) {
            out["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
        }
        out["output_router_logits"] = false;
        out["router_aux_loss_coef"] = 0.001;
    }
    return out;
}

std::vector<std::string> qwen3_preset_names() { return {"tiny", "0.6b", "8b"}; }

Result<Qwen3Config> qwen3_preset(std::string_view name, bool moe) {
    Qwen3Config c;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1000000.0;
    c.torch_dtype = "bfloat16";
    if (name == "tiny") {
        const TinyTokenizerIds ids = tiny_tokenizer_ids();
        c.vocab_size = kTinyVocabSize;
        c.hidden_size = 64;
        c.intermediate_size = 128;
        c.num_hidden_layers = 2;
        c.num_attention_heads = 4;
        c.num_key_value_heads = 2;
        c.head_dim = 16;
        c.max_position_embeddings = 4096;
        c.max_window_layers = 2;
        c.bos_token_id = ids.endoftext;
        c.eos_token_ids = {ids.im_end};
        // Dense ties its embeddings like Qwen3-0.6B; MoE unties them like Qwen3-30B-A3B and the
        // Qwen3-Omni thinker, so both paths get a generated checkpoint.
        c.tie_word_embeddings = !moe;
        if (moe) {
            c.model_type = "qwen3_moe";
            c.num_experts = 4;
            c.num_experts_per_tok = 2;
            c.moe_intermediate_size = 64;
            c.decoder_sparse_step = 1;
            c.norm_topk_prob = true;
        }
        return c;
    }
    if (name == "0.6b") {
        if (moe) {
            return fail(ErrorCode::not_found,
                        "there is no MoE variant of the 0.6b preset (use tiny with moe)");
        }
        // Qwen/Qwen3-0.6B config.json.
        c.vocab_size = 151936;
        c.hidden_size = 1024;
        c.intermediate_size = 3072;
        c.num_hidden_layers = 28;
        c.num_attention_heads = 16;
        c.num_key_value_heads = 8;
        c.head_dim = 128;
        c.max_position_embeddings = 40960;
        c.max_window_layers = 28;
        c.tie_word_embeddings = true;
        c.bos_token_id = 151643;
        c.eos_token_ids = {151645};
        return c;
    }
    if (name == "8b") {
        if (moe) {
            return fail(ErrorCode::not_found,
                        "there is no MoE variant of the 8b preset (use tiny with moe)");
        }
        // Qwen/Qwen3-8B config.json.
        c.vocab_size = 151936;
        c.hidden_size = 4096;
        c.intermediate_size = 12288;
        c.num_hidden_layers = 36;
        c.num_attention_heads = 32;
        c.num_key_value_heads = 8;
        c.head_dim = 128;
        c.max_position_embeddings = 40960;
        c.max_window_layers = 36;
        c.tie_word_embeddings = false;
        c.bos_token_id = 151643;
        c.eos_token_ids = {151645};
        return c;
    }
    return fail(ErrorCode::not_found,
                "unknown Qwen3 preset \"" + std::string(name) + "\" (tiny, 0.6b, 8b)");
}

}  // namespace omnirt::models::qwen3

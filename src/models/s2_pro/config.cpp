#include "models/s2_pro/config.h"

#include <limits>

#include "checkpoint/config_json.h"

namespace omnirt::models::s2_pro {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Far above the released sizes; keeps tensor lists small on hostile configs.
constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxSize = std::int64_t{1} << 24;
constexpr std::int64_t kMaxCodebooks = 64;

unexpected<Error> config_error(const std::string& message) {
    return checkpoint::config_error("S2-Pro", message);
}

Status read_int(const json& object, std::string_view where, std::string_view key, std::int64_t& out,
                bool required) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) {
        if (required) return config_error(checkpoint::json_path(where, key) + " is missing");
        return ok_status();
    }
    if (!value->is_number_integer() ||
        (value->is_number_unsigned() &&
         value->get<std::uint64_t>() >
             static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
        return config_error(checkpoint::json_path(where, key) + " must be an integer, not " +
                            checkpoint::shown_json(*value));
    }
    out = value->get<std::int64_t>();
    return ok_status();
}

Status read_size(const json& object, std::string_view where, std::string_view key,
                 std::int64_t& out, std::int64_t max) {
    OMNI_RETURN_IF_ERROR(read_int(object, where, key, out, true));
    if (out <= 0 || out > max) {
        return config_error(checkpoint::json_path(where, key) + " must be in [1, " +
                            std::to_string(max) + "], not " + std::to_string(out));
    }
    return ok_status();
}

Status read_number(const json& object, std::string_view where, std::string_view key, double& out) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) return ok_status();
    if (!value->is_number()) {
        return config_error(checkpoint::json_path(where, key) + " must be a number, not " +
                            checkpoint::shown_json(*value));
    }
    out = value->get<double>();
    if (!(out > 0) || out == std::numeric_limits<double>::infinity()) {
        return config_error(checkpoint::json_path(where, key) + " must be positive and finite");
    }
    return ok_status();
}

Status read_bool(const json& object, std::string_view where, std::string_view key, bool& out) {
    const json* value = checkpoint::json_member(object, key);
    if (value == nullptr) return ok_status();
    if (!value->is_boolean()) {
        return config_error(checkpoint::json_path(where, key) + " must be true or false, not " +
                            checkpoint::shown_json(*value));
    }
    out = value->get<bool>();
    return ok_status();
}

Result<FishDecoderConfig> parse_decoder(const json& root, std::string_view key, bool audio) {
    const json* object = checkpoint::json_member(root, key);
    if (object == nullptr) return config_error(std::string(key) + " is missing");
    if (!object->is_object()) {
        return config_error(std::string(key) + " must be an object, not " +
                            checkpoint::shown_json(*object));
    }
    FishDecoderConfig out;
    if (const json* type = checkpoint::json_member(*object, "model_type");
        type != nullptr && type->is_string()) {
        out.model_type = type->get<std::string>();
    }
    OMNI_RETURN_IF_ERROR(read_size(*object, key, "dim", out.dim, kMaxSize));
    OMNI_RETURN_IF_ERROR(read_size(*object, key, "n_layer", out.n_layer, kMaxLayers));
    OMNI_RETURN_IF_ERROR(read_size(*object, key, "n_head", out.n_head, 4096));
    out.n_local_heads = out.n_head;
    if (checkpoint::json_member(*object, "n_local_heads") != nullptr) {
        OMNI_RETURN_IF_ERROR(read_size(*object, key, "n_local_heads", out.n_local_heads, 4096));
    }
    OMNI_RETURN_IF_ERROR(read_size(*object, key, "head_dim", out.head_dim, 4096));
    OMNI_RETURN_IF_ERROR(
        read_size(*object, key, "intermediate_size", out.intermediate_size, kMaxSize));
    OMNI_RETURN_IF_ERROR(read_size(*object, key, "vocab_size", out.vocab_size, kMaxSize));
    OMNI_RETURN_IF_ERROR(read_size(*object, key, "max_seq_len", out.max_seq_len, 1 << 24));
    OMNI_RETURN_IF_ERROR(read_number(*object, key, "rope_base", out.rope_base));
    OMNI_RETURN_IF_ERROR(read_number(*object, key, "norm_eps", out.norm_eps));
    out.attention_qk_norm = !audio;  // the released values
    out.tie_word_embeddings = !audio;
    OMNI_RETURN_IF_ERROR(read_bool(*object, key, "attention_qk_norm", out.attention_qk_norm));
    OMNI_RETURN_IF_ERROR(read_bool(*object, key, "attention_qkv_bias", out.attention_qkv_bias));
    OMNI_RETURN_IF_ERROR(read_bool(*object, key, "attention_o_bias", out.attention_o_bias));
    OMNI_RETURN_IF_ERROR(read_bool(*object, key, "tie_word_embeddings", out.tie_word_embeddings));
    OMNI_RETURN_IF_ERROR(read_bool(*object, key, "use_moe", out.use_moe));
    if (out.n_head % out.n_local_heads != 0) {
        return config_error(std::string(key) + ": n_head " + std::to_string(out.n_head) +
                            " is not a multiple of n_local_heads " +
                            std::to_string(out.n_local_heads));
    }
    if (out.head_dim % 2 != 0) {
        return config_error(std::string(key) + ".head_dim must be even for RoPE");
    }
    if (out.attention_qkv_bias || out.attention_o_bias) {
        return fail(ErrorCode::unimplemented,
                    "S2-Pro config: " + std::string(key) + ": attention biases are not supported");
    }
    if (out.use_moe) {
        return fail(ErrorCode::unimplemented,
                    "S2-Pro config: " + std::string(key) + ".use_moe: MoE is not supported");
    }
    if (audio) {
        OMNI_RETURN_IF_ERROR(
            read_size(*object, key, "num_codebooks", out.num_codebooks, kMaxCodebooks));
        out.text_dim = out.dim;
        if (checkpoint::json_member(*object, "text_dim") != nullptr) {
            OMNI_RETURN_IF_ERROR(read_size(*object, key, "text_dim", out.text_dim, kMaxSize));
        }
    }
    return out;
}

Status read_token(const json& root, std::string_view key, std::int64_t& out) {
    OMNI_RETURN_IF_ERROR(read_int(root, "", key, out, false));
    if (out < 0) return config_error(std::string(key) + " must not be negative");
    return ok_status();
}

}  // namespace

Result<S2ProConfig> parse_s2_pro_config(const json& json) {
    if (!json.is_object()) return config_error("config.json must be a JSON object");
    const nlohmann::json* type = checkpoint::json_member(json, "model_type");
    if (type == nullptr || !type->is_string() || type->get<std::string>() != kModelType) {
        return config_error(
            "model_type must be \"" + std::string(kModelType) + "\", not " +
            (type == nullptr ? std::string("absent") : checkpoint::shown_json(*type)));
    }
    S2ProConfig out;
    if (const nlohmann::json* dtype = checkpoint::json_member(json, "torch_dtype");
        dtype && dtype->is_string()) {
        out.torch_dtype = dtype->get<std::string>();
    } else if (const nlohmann::json* other = checkpoint::json_member(json, "dtype");
               other && other->is_string()) {
        out.torch_dtype = other->get<std::string>();
    }
    OMNI_RETURN_IF_ERROR(read_token(json, "eos_token_id", out.ids.im_end));
    OMNI_RETURN_IF_ERROR(read_token(json, "pad_token_id", out.ids.pad));
    OMNI_RETURN_IF_ERROR(read_token(json, "audio_pad_token_id", out.ids.audio_pad));
    OMNI_RETURN_IF_ERROR(read_token(json, "semantic_start_token_id", out.ids.semantic_begin));
    OMNI_RETURN_IF_ERROR(read_token(json, "semantic_end_token_id", out.ids.semantic_end));
    OMNI_TRY(out.text, parse_decoder(json, "text_config", false));
    OMNI_TRY(out.audio, parse_decoder(json, "audio_decoder_config", true));
    out.num_codebooks = out.audio.num_codebooks;
    out.codebook_size = out.audio.vocab_size;

    const S2ProTokenIds& ids = out.ids;
    if (ids.semantic_end < ids.semantic_begin ||
        ids.semantic_end - ids.semantic_begin + 1 != out.codebook_size) {
        return config_error("semantic_start_token_id .. semantic_end_token_id (" +
                            std::to_string(ids.semantic_begin) + " .. " +
                            std::to_string(ids.semantic_end) +
                            ") must hold one id per code of audio_decoder_config.vocab_size " +
                            std::to_string(out.codebook_size));
    }
    for (std::int64_t id : {ids.im_end, ids.im_start, ids.voice, ids.semantic_end}) {
        if (id >= out.text.vocab_size) {
            return config_error("token id " + std::to_string(id) +
                                " is outside text_config.vocab_size " +
                                std::to_string(out.text.vocab_size));
        }
    }
    if (out.audio.text_dim != out.text.dim || out.audio.dim != out.text.dim) {
        return fail(ErrorCode::unimplemented,
                    "S2-Pro config: audio_decoder_config dim / text_dim must equal text_config.dim "
                    "(a project_in layer is not supported)");
    }
    if (out.audio.max_seq_len < out.num_codebooks) {
        return config_error("audio_decoder_config.max_seq_len " +
                            std::to_string(out.audio.max_seq_len) + " is below num_codebooks " +
                            std::to_string(out.num_codebooks));
    }
    return out;
}

qwen3::Qwen3Config to_qwen3(const FishDecoderConfig& decoder, std::int64_t eos) {
    qwen3::Qwen3Config out;
    out.model_type = decoder.model_type.empty() ? "fish_qwen3" : decoder.model_type;
    out.vocab_size = decoder.vocab_size;
    out.hidden_size = decoder.dim;
    out.intermediate_size = decoder.intermediate_size;
    out.num_hidden_layers = decoder.n_layer;
    out.num_attention_heads = decoder.n_head;
    out.num_key_value_heads = decoder.n_local_heads;
    out.head_dim = decoder.head_dim;
    out.rms_norm_eps = decoder.norm_eps;
    out.rope_theta = decoder.rope_base;
    out.max_position_embeddings = decoder.max_seq_len;
    out.tie_word_embeddings = decoder.tie_word_embeddings;
    out.eos_token_ids = {eos};
    return out;
}

std::vector<std::string> s2_pro_preset_names() { return {"tiny", "small", "s2-pro"}; }

Result<ordered_json> s2_pro_preset(std::string_view name, const std::string& dtype) {
    struct Sizes {
        std::int64_t dim, text_layers, heads, kv_heads, head_dim, intermediate, audio_layers;
    };
    Sizes sizes{};
    if (name == "tiny") {
        sizes = {64, 2, 4, 2, 16, 128, 2};
    } else if (name == "small") {
        sizes = {256, 4, 4, 2, 64, 768, 2};
    } else if (name == "s2-pro") {
        sizes = {2560, 36, 32, 8, 128, 9728, 4};
    } else {
        std::string known;
        for (const std::string& preset : s2_pro_preset_names()) {
            known += (known.empty() ? "" : ", ") + preset;
        }
        return fail(ErrorCode::not_found,
                    "unknown S2-Pro preset '" + std::string(name) + "'; known: " + known);
    }
    const S2ProTokenIds ids;
    const ordered_json text = {
        {"model_type", "fish_qwen3"},
        {"dim", sizes.dim},
        {"n_layer", sizes.text_layers},
        {"n_head", sizes.heads},
        {"n_local_heads", sizes.kv_heads},
        {"head_dim", sizes.head_dim},
        {"intermediate_size", sizes.intermediate},
        {"vocab_size", 155776},
        {"max_seq_len", 32768},
        {"rope_base", 1000000.0},
        {"norm_eps", 1e-6},
        {"attention_qk_norm", true},
        {"attention_qkv_bias", false},
        {"attention_o_bias", false},
        {"tie_word_embeddings", true},
        {"use_moe", false},
        {"dropout", 0.0},
        {"audio_hidden_dim", 2 * sizes.dim},
        {"initializer_range", 0.02},
    };
    const ordered_json audio = {
        {"model_type", "fish_qwen3_audio_decoder"},
        {"dim", sizes.dim},
        {"n_layer", sizes.audio_layers},
        {"n_head", sizes.heads},
        {"n_local_heads", sizes.kv_heads},
        {"head_dim", sizes.head_dim},
        {"intermediate_size", sizes.intermediate},
        {"vocab_size", 4096},
        {"num_codebooks", 10},
        {"text_dim", sizes.dim},
        {"max_seq_len", 11},
        {"rope_base", 1000000.0},
        {"norm_eps", 1e-6},
        {"attention_qk_norm", false},
        {"attention_qkv_bias", false},
        {"attention_o_bias", false},
        {"tie_word_embeddings", false},
        {"use_moe", false},
        {"dropout", 0.0},
    };
    return ordered_json{
        {"architectures", {std::string(kArchitecture)}},
        {"model_type", std::string(kModelType)},
        {"dtype", dtype},
        {"eos_token_id", ids.im_end},
        {"pad_token_id", ids.pad},
        {"audio_pad_token_id", ids.audio_pad},
        {"semantic_start_token_id", ids.semantic_begin},
        {"semantic_end_token_id", ids.semantic_end},
        {"text_config", text},
        {"audio_decoder_config", audio},
    };
}

}  // namespace omnirt::models::s2_pro

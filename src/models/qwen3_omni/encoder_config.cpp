#include "models/qwen3_omni/encoder_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include "models/qwen3_omni/audio_output_length.h"

namespace omnirt::models::qwen3_omni {
namespace {

using json = nlohmann::json;

// Far above the real model (a width of 1280, 32 layers); keeps hostile configs from asking for
// absurd allocations before a weight is read.
constexpr std::int64_t kMaxWidth = 1 << 20;
constexpr std::int64_t kMaxLayers = 4096;

// Parses one nested config object; every error names the object and the key.
class Reader {
  public:
    Reader(const json& object, std::string_view what) : object_(object), what_(what) {}

    unexpected<Error> error(const std::string& message) const {
        return fail(ErrorCode::invalid_argument, "Qwen3-Omni " + what_ + ": " + message);
    }

    // The first present, non-null key of `keys` (nullptr when none).
    const json* find(std::initializer_list<std::string_view> keys, std::string_view& found) const {
        for (std::string_view key : keys) {
            auto it = object_.find(key);
            if (it != object_.end() && !it->is_null()) {
                found = key;
                return &*it;
            }
        }
        return nullptr;
    }

    // An integer under one of `keys`; missing is an error when `required`, else `out` is kept.
    Status integer(std::initializer_list<std::string_view> keys, std::int64_t& out,
                   bool required) const {
        std::string_view key;
        const json* value = find(keys, key);
        if (value == nullptr) {
            if (required) return error(std::string(*keys.begin()) + " is missing");
            return ok_status();
        }
        if (!value->is_number_integer()) {
            return error(std::string(key) + " must be an integer, not " + shown(*value));
        }
        if (value->is_number_unsigned() &&
            value->get<std::uint64_t>() >
                static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return error(std::string(key) + " is too large");
        }
        out = value->get<std::int64_t>();
        return ok_status();
    }

    Status number(std::string_view key, double& out) const {
        std::string_view found;
        const json* value = find({key}, found);
        if (value == nullptr) return ok_status();
        if (!value->is_number()) {
            return error(std::string(key) + " must be a number, not " + shown(*value));
        }
        out = value->get<double>();
        return ok_status();
    }

    Status string(std::string_view key, std::string& out) const {
        std::string_view found;
        const json* value = find({key}, found);
        if (value == nullptr) return ok_status();
        if (!value->is_string()) {
            return error(std::string(key) + " must be a string, not " + shown(*value));
        }
        out = value->get<std::string>();
        return ok_status();
    }

    Status boolean(std::string_view key, bool& out) const {
        std::string_view found;
        const json* value = find({key}, found);
        if (value == nullptr) return ok_status();
        if (!value->is_boolean()) {
            return error(std::string(key) + " must be true or false, not " + shown(*value));
        }
        out = value->get<bool>();
        return ok_status();
    }

    Status integer_list(std::string_view key, std::vector<std::int64_t>& out, bool required) const {
        std::string_view found;
        const json* value = find({key}, found);
        if (value == nullptr) {
            if (required) return error(std::string(key) + " is missing");
            return ok_status();
        }
        if (!value->is_array()) {
            return error(std::string(key) + " must be a list of integers, not " + shown(*value));
        }
        out.clear();
        for (const json& item : *value) {
            if (!item.is_number_integer()) {
                return error(std::string(key) + " must hold integers, not " + shown(item));
            }
            out.push_back(item.get<std::int64_t>());
        }
        return ok_status();
    }

    static std::string shown(const json& value) {
        std::string text = value.dump();
        if (text.size() > 40) text = text.substr(0, 37) + "...";
        return text;
    }

  private:
    const json& object_;
    std::string what_;
};

Status in_range(const Reader& reader, std::string_view key, std::int64_t value,
                std::int64_t maximum) {
    if (value <= 0 || value > maximum) {
        return reader.error(std::string(key) + " must be in [1, " + std::to_string(maximum) +
                            "], not " + std::to_string(value));
    }
    return ok_status();
}

const json* nested(const json& config, std::string_view key) {
    if (!config.is_object()) return nullptr;
    auto thinker = config.find("thinker_config");
    if (thinker == config.end() || !thinker->is_object()) return nullptr;
    auto object = thinker->find(key);
    if (object == thinker->end() || !object->is_object()) return nullptr;
    return &*object;
}

}  // namespace

std::int64_t AudioEncoderConfig::conv_frequency_bins() const {
    return audio_chunk_output_length(num_mel_bins);
}

std::int64_t AudioEncoderConfig::conv_out_features() const {
    return downsample_hidden_size * conv_frequency_bins();
}

std::int64_t AudioEncoderConfig::chunk_tokens() const {
    return audio_chunk_output_length(chunk_frames());
}

std::int64_t AudioEncoderConfig::window_tokens() const {
    return chunk_tokens() * (n_window_infer / chunk_frames());
}

std::int64_t VisionEncoderConfig::patch_features() const {
    return in_channels * temporal_patch_size * patch_size * patch_size;
}

std::int64_t VisionEncoderConfig::position_grid_side() const {
    auto side = static_cast<std::int64_t>(std::llround(std::sqrt(num_position_embeddings)));
    while (side * side > num_position_embeddings) --side;
    while ((side + 1) * (side + 1) <= num_position_embeddings) ++side;
    return side;
}

Result<AudioEncoderConfig> parse_audio_encoder_config(const json& object) {
    const Reader reader(object, "audio_config");
    if (!object.is_object()) return reader.error("must be a JSON object");
    AudioEncoderConfig config;
    OMNI_RETURN_IF_ERROR(reader.integer({"num_mel_bins"}, config.num_mel_bins, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"d_model", "hidden_size"}, config.d_model, true));
    OMNI_RETURN_IF_ERROR(
        reader.integer({"encoder_layers", "num_hidden_layers"}, config.encoder_layers, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"encoder_attention_heads", "num_attention_heads"},
                                        config.encoder_attention_heads, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"encoder_ffn_dim"}, config.encoder_ffn_dim, true));
    OMNI_RETURN_IF_ERROR(
        reader.integer({"downsample_hidden_size"}, config.downsample_hidden_size, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"n_window"}, config.n_window, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"n_window_infer"}, config.n_window_infer, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"conv_chunksize"}, config.conv_chunksize, false));
    OMNI_RETURN_IF_ERROR(
        reader.integer({"max_source_positions"}, config.max_source_positions, false));
    OMNI_RETURN_IF_ERROR(reader.integer({"output_dim"}, config.output_dim, true));
    OMNI_RETURN_IF_ERROR(reader.string("activation_function", config.activation_function));
    OMNI_RETURN_IF_ERROR(reader.boolean("scale_embedding", config.scale_embedding));
    OMNI_RETURN_IF_ERROR(validate(config));
    return config;
}

Result<VisionEncoderConfig> parse_vision_encoder_config(const json& object) {
    const Reader reader(object, "vision_config");
    if (!object.is_object()) return reader.error("must be a JSON object");
    VisionEncoderConfig config;
    OMNI_RETURN_IF_ERROR(reader.integer({"depth"}, config.depth, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"hidden_size"}, config.hidden_size, true));
    OMNI_RETURN_IF_ERROR(
        reader.integer({"num_heads", "num_attention_heads"}, config.num_heads, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"intermediate_size"}, config.intermediate_size, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"in_channels", "in_chans"}, config.in_channels, false));
    OMNI_RETURN_IF_ERROR(
        reader.integer({"patch_size", "spatial_patch_size"}, config.patch_size, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"temporal_patch_size"}, config.temporal_patch_size, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"spatial_merge_size"}, config.spatial_merge_size, true));
    OMNI_RETURN_IF_ERROR(
        reader.integer({"num_position_embeddings"}, config.num_position_embeddings, true));
    OMNI_RETURN_IF_ERROR(reader.integer({"out_hidden_size"}, config.out_hidden_size, true));
    OMNI_RETURN_IF_ERROR(
        reader.integer_list("deepstack_visual_indexes", config.deepstack_visual_indexes, true));
    OMNI_RETURN_IF_ERROR(reader.string("hidden_act", config.hidden_act));
    OMNI_RETURN_IF_ERROR(reader.number("rope_theta", config.rope_theta));
    std::string_view found;
    if (const json* parameters = reader.find({"rope_parameters"}, found);
        parameters != nullptr && reader.find({"rope_theta"}, found) == nullptr) {
        if (!parameters->is_object()) return reader.error("rope_parameters must be an object");
        OMNI_RETURN_IF_ERROR(Reader(*parameters, "vision_config.rope_parameters")
                                 .number("rope_theta", config.rope_theta));
    }
    OMNI_RETURN_IF_ERROR(validate(config));
    return config;
}

Result<AudioEncoderConfig> audio_encoder_config_of(const json& config) {
    const json* object = nested(config, "audio_config");
    if (object == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni config: thinker_config.audio_config is missing or not an object");
    }
    return parse_audio_encoder_config(*object);
}

Result<VisionEncoderConfig> vision_encoder_config_of(const json& config) {
    const json* object = nested(config, "vision_config");
    if (object == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni config: thinker_config.vision_config is missing or not an object");
    }
    return parse_vision_encoder_config(*object);
}

Status validate(const AudioEncoderConfig& config) {
    const Reader reader(json::object(), "audio_config");
    OMNI_RETURN_IF_ERROR(in_range(reader, "num_mel_bins", config.num_mel_bins, 4096));
    OMNI_RETURN_IF_ERROR(in_range(reader, "d_model", config.d_model, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range(reader, "encoder_layers", config.encoder_layers, kMaxLayers));
    OMNI_RETURN_IF_ERROR(in_range(reader, "encoder_attention_heads", config.encoder_attention_heads,
                                  config.d_model));
    OMNI_RETURN_IF_ERROR(in_range(reader, "encoder_ffn_dim", config.encoder_ffn_dim, kMaxWidth));
    OMNI_RETURN_IF_ERROR(
        in_range(reader, "downsample_hidden_size", config.downsample_hidden_size, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range(reader, "n_window", config.n_window, 1 << 16));
    OMNI_RETURN_IF_ERROR(in_range(reader, "n_window_infer", config.n_window_infer, 1 << 24));
    OMNI_RETURN_IF_ERROR(in_range(reader, "conv_chunksize", config.conv_chunksize, 1 << 24));
    OMNI_RETURN_IF_ERROR(
        in_range(reader, "max_source_positions", config.max_source_positions, 1 << 24));
    OMNI_RETURN_IF_ERROR(in_range(reader, "output_dim", config.output_dim, kMaxWidth));
    if (config.d_model % config.encoder_attention_heads != 0) {
        return reader.error("d_model (" + std::to_string(config.d_model) +
                            ") must be a multiple of encoder_attention_heads (" +
                            std::to_string(config.encoder_attention_heads) + ")");
    }
    if (config.d_model % 2 != 0 || config.d_model < 4) {
        return reader.error("d_model must be even and at least 4 (sinusoidal positions), not " +
                            std::to_string(config.d_model));
    }
    if (config.n_window_infer < config.chunk_frames()) {
        return reader.error("n_window_infer (" + std::to_string(config.n_window_infer) +
                            ") must be at least one chunk, 2 * n_window = " +
                            std::to_string(config.chunk_frames()));
    }
    if (config.max_source_positions < config.chunk_tokens()) {
        return reader.error("max_source_positions (" + std::to_string(config.max_source_positions) +
                            ") is shorter than the tokens of one chunk (" +
                            std::to_string(config.chunk_tokens()) + ")");
    }
    if (config.conv_out_features() > kMaxWidth) {
        return reader.error("downsample_hidden_size * conv frequency bins is too large");
    }
    if (config.activation_function != "gelu") {
        return fail(ErrorCode::unimplemented, "Qwen3-Omni audio_config: activation_function '" +
                                                  config.activation_function +
                                                  "' is not implemented (gelu)");
    }
    if (config.scale_embedding) {
        return fail(ErrorCode::unimplemented,
                    "Qwen3-Omni audio_config: scale_embedding true is not implemented");
    }
    return ok_status();
}

Status validate(const VisionEncoderConfig& config) {
    const Reader reader(json::object(), "vision_config");
    OMNI_RETURN_IF_ERROR(in_range(reader, "depth", config.depth, kMaxLayers));
    OMNI_RETURN_IF_ERROR(in_range(reader, "hidden_size", config.hidden_size, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range(reader, "num_heads", config.num_heads, config.hidden_size));
    OMNI_RETURN_IF_ERROR(
        in_range(reader, "intermediate_size", config.intermediate_size, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range(reader, "in_channels", config.in_channels, 64));
    OMNI_RETURN_IF_ERROR(in_range(reader, "patch_size", config.patch_size, 1024));
    OMNI_RETURN_IF_ERROR(in_range(reader, "temporal_patch_size", config.temporal_patch_size, 1024));
    OMNI_RETURN_IF_ERROR(in_range(reader, "spatial_merge_size", config.spatial_merge_size, 64));
    OMNI_RETURN_IF_ERROR(
        in_range(reader, "num_position_embeddings", config.num_position_embeddings, 1 << 24));
    OMNI_RETURN_IF_ERROR(in_range(reader, "out_hidden_size", config.out_hidden_size, kMaxWidth));
    if (config.hidden_size % config.num_heads != 0) {
        return reader.error("hidden_size (" + std::to_string(config.hidden_size) +
                            ") must be a multiple of num_heads (" +
                            std::to_string(config.num_heads) + ")");
    }
    if (config.head_dim() % 4 != 0) {
        return reader.error("head_dim hidden_size / num_heads (" +
                            std::to_string(config.head_dim()) +
                            ") must be a multiple of 4 (2-D rotary over rows and columns)");
    }
    const std::int64_t side = config.position_grid_side();
    if (side * side != config.num_position_embeddings) {
        return reader.error("num_position_embeddings (" +
                            std::to_string(config.num_position_embeddings) +
                            ") must be a square (a learned grid)");
    }
    if (config.patch_features() > kMaxWidth || config.merged_hidden_size() > kMaxWidth) {
        return reader.error("the patch or merged width is too large");
    }
    std::set<std::int64_t> seen;
    for (std::int64_t index : config.deepstack_visual_indexes) {
        if (index < 0 || index >= config.depth) {
            return reader.error("deepstack_visual_indexes entry " + std::to_string(index) +
                                " is outside the blocks [0, " + std::to_string(config.depth) + ")");
        }
        if (!seen.insert(index).second) {
            return reader.error("deepstack_visual_indexes lists " + std::to_string(index) +
                                " twice");
        }
    }
    if (!(config.rope_theta > 0.0) || !std::isfinite(config.rope_theta)) {
        return reader.error("rope_theta must be a positive number");
    }
    if (config.hidden_act != "gelu_pytorch_tanh" && config.hidden_act != "gelu") {
        return fail(ErrorCode::unimplemented, "Qwen3-Omni vision_config: hidden_act '" +
                                                  config.hidden_act +
                                                  "' is not implemented (gelu_pytorch_tanh, gelu)");
    }
    return ok_status();
}

json to_json(const AudioEncoderConfig& config) {
    return json{
        {"model_type", "qwen3_omni_moe_audio_encoder"},
        {"num_mel_bins", config.num_mel_bins},
        {"d_model", config.d_model},
        {"encoder_layers", config.encoder_layers},
        {"encoder_attention_heads", config.encoder_attention_heads},
        {"encoder_ffn_dim", config.encoder_ffn_dim},
        {"downsample_hidden_size", config.downsample_hidden_size},
        {"n_window", config.n_window},
        {"n_window_infer", config.n_window_infer},
        {"conv_chunksize", config.conv_chunksize},
        {"max_source_positions", config.max_source_positions},
        {"output_dim", config.output_dim},
        {"activation_function", config.activation_function},
        {"scale_embedding", config.scale_embedding},
    };
}

json to_json(const VisionEncoderConfig& config) {
    return json{
        {"model_type", "qwen3_omni_moe_vision_encoder"},
        {"depth", config.depth},
        {"hidden_size", config.hidden_size},
        {"num_heads", config.num_heads},
        {"intermediate_size", config.intermediate_size},
        {"in_channels", config.in_channels},
        {"patch_size", config.patch_size},
        {"temporal_patch_size", config.temporal_patch_size},
        {"spatial_merge_size", config.spatial_merge_size},
        {"num_position_embeddings", config.num_position_embeddings},
        {"out_hidden_size", config.out_hidden_size},
        {"deepstack_visual_indexes", config.deepstack_visual_indexes},
        {"hidden_act", config.hidden_act},
    };
}

}  // namespace omnirt::models::qwen3_omni

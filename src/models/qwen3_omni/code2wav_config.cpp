#include "models/qwen3_omni/code2wav_config.h"

#include <cmath>
#include <limits>
#include <string>
#include <string_view>

namespace omnirt::models::qwen3_omni {
namespace {

using json = nlohmann::json;

// Far above the released model (width 1024, 8 layers, factors up to 8); keeps hostile configs
// from asking for absurd allocations or overflowing the length arithmetic.
constexpr std::int64_t kMaxWidth = 1 << 20;
constexpr std::int64_t kMaxLayers = 4096;
constexpr std::int64_t kMaxFactor = 64;
constexpr std::size_t kMaxStages = 8;

unexpected<Error> config_error(const std::string& message) {
    return fail(ErrorCode::invalid_argument, "Qwen3-Omni code2wav_config: " + message);
}

std::string shown(const json& value) {
    std::string text = value.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return text;
}

const json* find(const json& object, std::string_view key) {
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

Status read_integer(const json& object, std::string_view key, std::int64_t& out) {
    const json* value = find(object, key);
    if (value == nullptr) return config_error(std::string(key) + " is missing");
    if (!value->is_number_integer() ||
        (value->is_number_unsigned() &&
         value->get<std::uint64_t>() >
             static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
        return config_error(std::string(key) + " must be an integer, not " + shown(*value));
    }
    out = value->get<std::int64_t>();
    return ok_status();
}

Status read_number(const json& object, std::string_view key, double& out,
                   std::string_view where = "") {
    const json* value = find(object, key);
    if (value == nullptr)
        return config_error(std::string(where) + std::string(key) + " is missing");
    if (!value->is_number()) {
        return config_error(std::string(where) + std::string(key) + " must be a number, not " +
                            shown(*value));
    }
    out = value->get<double>();
    return ok_status();
}

Status read_integer_list(const json& object, std::string_view key, std::vector<std::int64_t>& out) {
    const json* value = find(object, key);
    if (value == nullptr) return config_error(std::string(key) + " is missing");
    if (!value->is_array()) {
        return config_error(std::string(key) + " must be a list of integers, not " + shown(*value));
    }
    out.clear();
    for (const json& item : *value) {
        if (!item.is_number_integer()) {
            return config_error(std::string(key) + " must hold integers, not " + shown(item));
        }
        out.push_back(item.get<std::int64_t>());
    }
    return ok_status();
}

Status in_range(std::string_view key, std::int64_t value, std::int64_t maximum) {
    if (value <= 0 || value > maximum) {
        return config_error(std::string(key) + " must be in [1, " + std::to_string(maximum) +
                            "], not " + std::to_string(value));
    }
    return ok_status();
}

Status check_factors(std::string_view key, const std::vector<std::int64_t>& factors) {
    if (factors.empty()) return config_error(std::string(key) + " must not be empty");
    if (factors.size() > kMaxStages) {
        return config_error(std::string(key) + " has " + std::to_string(factors.size()) +
                            " entries, at most " + std::to_string(kMaxStages) + " are supported");
    }
    for (std::int64_t factor : factors) {
        OMNI_RETURN_IF_ERROR(in_range(std::string(key) + " entries", factor, kMaxFactor));
    }
    return ok_status();
}

}  // namespace

std::int64_t Code2WavConfig::output_channels() const {
    return decoder_dim >> static_cast<int>(upsample_rates.size());
}

std::int64_t Code2WavConfig::total_upsample() const {
    std::int64_t total = 1;
    for (std::int64_t ratio : upsampling_ratios) total *= ratio;
    for (std::int64_t rate : upsample_rates) total *= rate;
    return total;
}

std::int64_t Code2WavConfig::output_samples(std::int64_t frames) const {
    if (frames <= 0) return 0;
    std::int64_t length = frames;
    for (std::int64_t ratio : upsampling_ratios) length *= ratio;
    for (std::int64_t rate : upsample_rates) length = (length - 1) * rate;
    return length;
}

std::vector<Code2WavChunk> code2wav_chunks(std::int64_t frames, std::int64_t chunk_size,
                                           std::int64_t left_context) {
    OMNI_CHECK(chunk_size >= 1 && left_context >= 0, "code2wav_chunks: bad chunking");
    std::vector<Code2WavChunk> chunks;
    for (std::int64_t begin = 0; begin < frames; begin += chunk_size) {
        chunks.push_back({.begin = begin,
                          .end = std::min(begin + chunk_size, frames),
                          .context = std::min(left_context, begin)});
    }
    return chunks;
}

std::int64_t chunk_output_samples(const Code2WavConfig& config, const Code2WavChunk& chunk) {
    return config.output_samples(chunk.frames()) - chunk.context * config.total_upsample();
}

std::int64_t chunked_output_samples(const Code2WavConfig& config, std::int64_t frames,
                                    std::int64_t chunk_size, std::int64_t left_context) {
    std::int64_t total = 0;
    for (const Code2WavChunk& chunk : code2wav_chunks(frames, chunk_size, left_context)) {
        total += chunk_output_samples(config, chunk);
    }
    return total;
}

Result<Code2WavConfig> parse_code2wav_config(const json& object) {
    if (!object.is_object()) return config_error("must be an object, not " + shown(object));
    Code2WavConfig config;
    OMNI_RETURN_IF_ERROR(read_integer(object, "codebook_size", config.codebook_size));
    OMNI_RETURN_IF_ERROR(read_integer(object, "num_quantizers", config.num_quantizers));
    OMNI_RETURN_IF_ERROR(read_integer(object, "hidden_size", config.hidden_size));
    OMNI_RETURN_IF_ERROR(read_integer(object, "num_hidden_layers", config.num_hidden_layers));
    OMNI_RETURN_IF_ERROR(read_integer(object, "num_attention_heads", config.num_attention_heads));
    OMNI_RETURN_IF_ERROR(read_integer(object, "num_key_value_heads", config.num_key_value_heads));
    OMNI_RETURN_IF_ERROR(read_integer(object, "intermediate_size", config.intermediate_size));
    OMNI_RETURN_IF_ERROR(read_integer(object, "sliding_window", config.sliding_window));
    OMNI_RETURN_IF_ERROR(read_integer(object, "decoder_dim", config.decoder_dim));
    OMNI_RETURN_IF_ERROR(read_number(object, "rms_norm_eps", config.rms_norm_eps));
    OMNI_RETURN_IF_ERROR(
        read_number(object, "layer_scale_initial_scale", config.layer_scale_initial_scale));
    OMNI_RETURN_IF_ERROR(read_integer_list(object, "upsampling_ratios", config.upsampling_ratios));
    OMNI_RETURN_IF_ERROR(read_integer_list(object, "upsample_rates", config.upsample_rates));
    if (find(object, "rope_theta") != nullptr) {
        OMNI_RETURN_IF_ERROR(read_number(object, "rope_theta", config.rope_theta));
    } else if (const json* parameters = find(object, "rope_parameters"); parameters != nullptr) {
        if (!parameters->is_object()) return config_error("rope_parameters must be an object");
        OMNI_RETURN_IF_ERROR(
            read_number(*parameters, "rope_theta", config.rope_theta, "rope_parameters."));
    } else {
        return config_error("rope_theta is missing (nor is there rope_parameters.rope_theta)");
    }
    if (const json* act = find(object, "hidden_act"); act != nullptr && *act != "silu") {
        return fail(ErrorCode::unimplemented, "Qwen3-Omni code2wav_config: hidden_act " +
                                                  shown(*act) +
                                                  " is not implemented (only \"silu\")");
    }
    if (const json* bias = find(object, "attention_bias"); bias != nullptr && *bias != false) {
        return fail(ErrorCode::unimplemented,
                    "Qwen3-Omni code2wav_config: attention_bias " + shown(*bias) +
                        " is not implemented (the released checkpoint has no attention biases)");
    }
    OMNI_RETURN_IF_ERROR(validate(config));
    return config;
}

Result<Code2WavConfig> code2wav_config_of(const json& config) {
    const json* code2wav = config.is_object() ? find(config, "code2wav_config") : nullptr;
    if (code2wav == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni config: code2wav_config is missing (a checkpoint without audio "
                    "output has no code2wav)");
    }
    return parse_code2wav_config(*code2wav);
}

Status validate(const Code2WavConfig& config) {
    OMNI_RETURN_IF_ERROR(in_range("codebook_size", config.codebook_size, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range("num_quantizers", config.num_quantizers, 1024));
    OMNI_RETURN_IF_ERROR(in_range("hidden_size", config.hidden_size, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range("num_hidden_layers", config.num_hidden_layers, kMaxLayers));
    OMNI_RETURN_IF_ERROR(
        in_range("num_attention_heads", config.num_attention_heads, config.hidden_size));
    OMNI_RETURN_IF_ERROR(
        in_range("num_key_value_heads", config.num_key_value_heads, config.num_attention_heads));
    OMNI_RETURN_IF_ERROR(in_range("intermediate_size", config.intermediate_size, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range("sliding_window", config.sliding_window, kMaxWidth));
    OMNI_RETURN_IF_ERROR(in_range("decoder_dim", config.decoder_dim, kMaxWidth));
    if (config.codebook_size * config.num_quantizers > std::int64_t{1} << 31) {
        return config_error("codebook_size * num_quantizers is too large");
    }
    if (config.hidden_size % config.num_attention_heads != 0 || config.head_dim() % 2 != 0) {
        return config_error("num_attention_heads (" + std::to_string(config.num_attention_heads) +
                            ") must divide hidden_size (" + std::to_string(config.hidden_size) +
                            ") into an even head dimension");
    }
    if (config.num_attention_heads % config.num_key_value_heads != 0) {
        return config_error("num_key_value_heads (" + std::to_string(config.num_key_value_heads) +
                            ") must divide num_attention_heads (" +
                            std::to_string(config.num_attention_heads) + ")");
    }
    OMNI_RETURN_IF_ERROR(check_factors("upsampling_ratios", config.upsampling_ratios));
    OMNI_RETURN_IF_ERROR(check_factors("upsample_rates", config.upsample_rates));
    const std::int64_t halvings = std::int64_t{1} << config.upsample_rates.size();
    if (config.decoder_dim % halvings != 0) {
        return config_error("decoder_dim (" + std::to_string(config.decoder_dim) +
                            ") must be divisible by 2^" +
                            std::to_string(config.upsample_rates.size()) +
                            " (each upsample_rates entry halves the channels)");
    }
    if (config.output_samples(1) < 1) {
        return config_error(
            "one frame must give at least one sample: the product of upsampling_ratios must be "
            "at least 2");
    }
    if (!(config.rms_norm_eps > 0.0) || !std::isfinite(config.rms_norm_eps)) {
        return config_error("rms_norm_eps must be a positive number");
    }
    if (!(config.rope_theta > 0.0) || !std::isfinite(config.rope_theta)) {
        return config_error("rope_theta must be a positive number");
    }
    if (!std::isfinite(config.layer_scale_initial_scale)) {
        return config_error("layer_scale_initial_scale must be a finite number");
    }
    return ok_status();
}

json to_json(const Code2WavConfig& config) {
    return json{
        {"codebook_size", config.codebook_size},
        {"num_quantizers", config.num_quantizers},
        {"hidden_size", config.hidden_size},
        {"num_hidden_layers", config.num_hidden_layers},
        {"num_attention_heads", config.num_attention_heads},
        {"num_key_value_heads", config.num_key_value_heads},
        {"intermediate_size", config.intermediate_size},
        {"sliding_window", config.sliding_window},
        {"rope_theta", config.rope_theta},
        {"rms_norm_eps", config.rms_norm_eps},
        {"layer_scale_initial_scale", config.layer_scale_initial_scale},
        {"upsampling_ratios", config.upsampling_ratios},
        {"upsample_rates", config.upsample_rates},
        {"decoder_dim", config.decoder_dim},
        {"hidden_act", "silu"},
        {"attention_bias", false},
    };
}

}  // namespace omnirt::models::qwen3_omni

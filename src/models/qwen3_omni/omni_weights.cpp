#include "models/qwen3_omni/omni_weights.h"

#include <string>
#include <utility>

#include "models/qwen3/weights.h"

namespace omnirt::models::qwen3_omni {
namespace {

using json = nlohmann::json;
using checkpoint::ExpectedTensor;

// Reads positive integer sizes out of one sub-config, naming it in errors.
class Sizes {
  public:
    Sizes(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

    Result<std::int64_t> get(std::string_view key) const {
        auto it = object_.find(key);
        if (it == object_.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0) {
            return fail(ErrorCode::invalid_argument,
                        "Qwen3-Omni config: " + where_ + std::string(key) +
                            " must be a positive integer" +
                            (it == object_.end() ? " (missing)" : ", not " + it->dump()));
        }
        return it->get<std::int64_t>();
    }
    // The first present key of two spellings.
    Result<std::int64_t> get(std::string_view key, std::string_view other) const {
        return object_.contains(key) ? get(key) : get(other);
    }
    Result<std::vector<std::int64_t>> list(std::string_view key) const {
        auto it = object_.find(key);
        std::vector<std::int64_t> out;
        if (it == object_.end() || !it->is_array()) {
            return fail(ErrorCode::invalid_argument,
                        "Qwen3-Omni config: " + where_ + std::string(key) + " must be a list");
        }
        for (const json& item : *it) {
            if (!item.is_number_integer() || item.get<std::int64_t>() < 0) {
                return fail(ErrorCode::invalid_argument, "Qwen3-Omni config: " + where_ +
                                                             std::string(key) +
                                                             " must hold non-negative integers");
            }
            out.push_back(item.get<std::int64_t>());
        }
        return out;
    }

  private:
    const json& object_;
    std::string where_;
};

struct List {
    std::vector<ExpectedTensor> tensors;
    void add(std::string name, Shape shape) {
        tensors.push_back({.name = std::move(name), .shape = std::move(shape)});
    }
    void linear(const std::string& name, std::int64_t out, std::int64_t in, bool bias) {
        add(name + ".weight", {out, in});
        if (bias) add(name + ".bias", {out});
    }
    void layer_norm(const std::string& name, std::int64_t width) {
        add(name + ".weight", {width});
        add(name + ".bias", {width});
    }
};

Status add_audio(List& list, const json& audio) {
    const Sizes s(audio, "thinker_config.audio_config.");
    OMNI_TRY(std::int64_t mels, s.get("num_mel_bins"));
    OMNI_TRY(std::int64_t width, s.get("d_model"));
    OMNI_TRY(std::int64_t layers, s.get("encoder_layers"));
    OMNI_TRY(std::int64_t ffn, s.get("encoder_ffn_dim"));
    OMNI_TRY(std::int64_t channels, s.get("downsample_hidden_size"));
    OMNI_TRY(std::int64_t out, s.get("output_dim"));
    const std::string p = "thinker.audio_tower.";
    list.add(p + "conv2d1.weight", {channels, 1, 3, 3});
    list.add(p + "conv2d1.bias", {channels});
    for (const char* conv : {"conv2d2", "conv2d3"}) {
        list.add(p + conv + ".weight", {channels, channels, 3, 3});
        list.add(p + conv + ".bias", {channels});
    }
    // Three stride-2 convolutions over the mel axis: ceil(mels / 8) rows per channel.
    const std::int64_t freq = (((mels + 1) / 2 + 1) / 2 + 1) / 2;
    list.linear(p + "conv_out", width, channels * freq, false);
    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string layer = p + "layers." + std::to_string(i) + ".";
        for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
            list.linear(layer + "self_attn." + proj, width, width, true);
        }
        list.layer_norm(layer + "self_attn_layer_norm", width);
        list.linear(layer + "fc1", ffn, width, true);
        list.linear(layer + "fc2", width, ffn, true);
        list.layer_norm(layer + "final_layer_norm", width);
    }
    list.layer_norm(p + "ln_post", width);
    list.linear(p + "proj1", width, width, true);
    list.linear(p + "proj2", out, width, true);
    return ok_status();
}

void add_merger(List& list, const std::string& name, std::int64_t width, std::int64_t merged,
                std::int64_t out, bool norm_after_grouping) {
    list.layer_norm(name + ".ln_q", norm_after_grouping ? merged : width);
    list.linear(name + ".mlp.0", merged, merged, true);
    list.linear(name + ".mlp.2", out, merged, true);
}

Status add_vision(List& list, const json& vision) {
    const Sizes s(vision, "thinker_config.vision_config.");
    OMNI_TRY(std::int64_t depth, s.get("depth"));
    OMNI_TRY(std::int64_t width, s.get("hidden_size"));
    OMNI_TRY(std::int64_t ffn, s.get("intermediate_size"));
    OMNI_TRY(std::int64_t channels, s.get("in_channels"));
    OMNI_TRY(std::int64_t patch, s.get("patch_size"));
    OMNI_TRY(std::int64_t temporal, s.get("temporal_patch_size"));
    OMNI_TRY(std::int64_t merge, s.get("spatial_merge_size"));
    OMNI_TRY(std::int64_t positions, s.get("num_position_embeddings"));
    OMNI_TRY(std::int64_t out, s.get("out_hidden_size"));
    OMNI_TRY(std::vector<std::int64_t> deepstack, s.list("deepstack_visual_indexes"));
    const std::string p = "thinker.visual.";
    list.add(p + "patch_embed.proj.weight", {width, channels, temporal, patch, patch});
    list.add(p + "patch_embed.proj.bias", {width});
    list.add(p + "pos_embed.weight", {positions, width});
    for (std::int64_t i = 0; i < depth; ++i) {
        const std::string block = p + "blocks." + std::to_string(i) + ".";
        list.layer_norm(block + "norm1", width);
        list.layer_norm(block + "norm2", width);
        list.linear(block + "attn.qkv", 3 * width, width, true);
        list.linear(block + "attn.proj", width, width, true);
        list.linear(block + "mlp.linear_fc1", ffn, width, true);
        list.linear(block + "mlp.linear_fc2", width, ffn, true);
    }
    const std::int64_t merged = width * merge * merge;
    add_merger(list, p + "merger", width, merged, out, false);
    for (std::size_t k = 0; k < deepstack.size(); ++k) {
        add_merger(list, p + "merger_list." + std::to_string(k), width, merged, out, true);
    }
    return ok_status();
}

// q/k/v/o, q_norm/k_norm and the two layer norms of a Qwen3-style decoder layer.
void add_attention_layer(List& list, const std::string& layer, std::int64_t hidden,
                         std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) {
    const std::string attn = layer + "self_attn.";
    list.linear(attn + "q_proj", heads * head_dim, hidden, false);
    list.linear(attn + "k_proj", kv_heads * head_dim, hidden, false);
    list.linear(attn + "v_proj", kv_heads * head_dim, hidden, false);
    list.linear(attn + "o_proj", hidden, heads * head_dim, false);
    list.add(attn + "q_norm.weight", {head_dim});
    list.add(attn + "k_norm.weight", {head_dim});
    list.add(layer + "input_layernorm.weight", {hidden});
    list.add(layer + "post_attention_layernorm.weight", {hidden});
}

void add_swiglu(List& list, const std::string& mlp, std::int64_t hidden, std::int64_t width) {
    list.linear(mlp + "gate_proj", width, hidden, false);
    list.linear(mlp + "up_proj", width, hidden, false);
    list.linear(mlp + "down_proj", hidden, width, false);
}

Status add_talker(List& list, const json& talker, std::int64_t thinker_hidden) {
    const std::string where = "talker_config.";
    auto text_it = talker.find("text_config");
    auto predictor_it = talker.find("code_predictor_config");
    if (text_it == talker.end() || !text_it->is_object() || predictor_it == talker.end() ||
        !predictor_it->is_object()) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni config: " + where +
                        "text_config and code_predictor_config must be objects");
    }
    const Sizes t(*text_it, where + "text_config.");
    OMNI_TRY(std::int64_t hidden, t.get("hidden_size"));
    OMNI_TRY(std::int64_t layers, t.get("num_hidden_layers"));
    OMNI_TRY(std::int64_t heads, t.get("num_attention_heads"));
    OMNI_TRY(std::int64_t kv_heads, t.get("num_key_value_heads"));
    OMNI_TRY(std::int64_t head_dim, t.get("head_dim"));
    OMNI_TRY(std::int64_t vocab, t.get("vocab_size"));
    OMNI_TRY(std::int64_t experts, t.get("num_experts", "num_local_experts"));
    OMNI_TRY(std::int64_t expert_width, t.get("moe_intermediate_size"));
    OMNI_TRY(std::int64_t shared_width, t.get("shared_expert_intermediate_size"));
    OMNI_TRY(std::int64_t projection_width, t.get("intermediate_size"));
    const std::string p = "talker.";
    list.add(p + "model.codec_embedding.weight", {vocab, hidden});
    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string layer = p + "model.layers." + std::to_string(i) + ".";
        add_attention_layer(list, layer, hidden, heads, kv_heads, head_dim);
        const std::string mlp = layer + "mlp.";
        list.linear(mlp + "gate", experts, hidden, false);
        for (std::int64_t e = 0; e < experts; ++e) {
            add_swiglu(list, mlp + "experts." + std::to_string(e) + ".", hidden, expert_width);
        }
        add_swiglu(list, mlp + "shared_expert.", hidden, shared_width);
        list.linear(mlp + "shared_expert_gate", 1, hidden, false);
    }
    list.add(p + "model.norm.weight", {hidden});
    list.linear(p + "codec_head", vocab, hidden, false);
    for (const char* projection : {"text_projection", "hidden_projection"}) {
        list.linear(p + projection + ".linear_fc1", projection_width, thinker_hidden, true);
        list.linear(p + projection + ".linear_fc2", hidden, projection_width, true);
    }
    const Sizes c(*predictor_it, where + "code_predictor_config.");
    OMNI_TRY(std::int64_t c_hidden, c.get("hidden_size"));
    OMNI_TRY(std::int64_t c_layers, c.get("num_hidden_layers"));
    OMNI_TRY(std::int64_t c_heads, c.get("num_attention_heads"));
    OMNI_TRY(std::int64_t c_kv_heads, c.get("num_key_value_heads"));
    OMNI_TRY(std::int64_t c_head_dim, c.get("head_dim"));
    OMNI_TRY(std::int64_t c_ffn, c.get("intermediate_size"));
    OMNI_TRY(std::int64_t c_vocab, c.get("vocab_size"));
    OMNI_TRY(std::int64_t groups, c.get("num_code_groups"));
    if (groups < 2) {
        return fail(ErrorCode::invalid_argument, "Qwen3-Omni config: " + where +
                                                     "code_predictor_config.num_code_groups must "
                                                     "be at least 2");
    }
    const std::string cp = p + "code_predictor.";
    for (std::int64_t g = 0; g + 1 < groups; ++g) {
        list.add(cp + "model.codec_embedding." + std::to_string(g) + ".weight",
                 {c_vocab, c_hidden});
    }
    for (std::int64_t i = 0; i < c_layers; ++i) {
        const std::string layer = cp + "model.layers." + std::to_string(i) + ".";
        add_attention_layer(list, layer, c_hidden, c_heads, c_kv_heads, c_head_dim);
        add_swiglu(list, layer + "mlp.", c_hidden, c_ffn);
    }
    list.add(cp + "model.norm.weight", {c_hidden});
    for (std::int64_t g = 0; g + 1 < groups; ++g) {
        list.linear(cp + "lm_head." + std::to_string(g), c_vocab, c_hidden, false);
    }
    return ok_status();
}

void add_conv(List& list, const std::string& name, std::int64_t out, std::int64_t in,
              std::int64_t kernel) {
    list.add(name + ".conv.weight", {out, in, kernel});
    list.add(name + ".conv.bias", {out});
}

void add_snake(List& list, const std::string& name, std::int64_t channels) {
    list.add(name + ".alpha", {channels});
    list.add(name + ".beta", {channels});
}

Status add_code2wav(List& list, const json& code2wav) {
    const Sizes s(code2wav, "code2wav_config.");
    OMNI_TRY(std::int64_t hidden, s.get("hidden_size"));
    OMNI_TRY(std::int64_t layers, s.get("num_hidden_layers"));
    OMNI_TRY(std::int64_t ffn, s.get("intermediate_size"));
    OMNI_TRY(std::int64_t codebook, s.get("codebook_size"));
    OMNI_TRY(std::int64_t quantizers, s.get("num_quantizers"));
    OMNI_TRY(std::int64_t decoder_dim, s.get("decoder_dim"));
    OMNI_TRY(std::vector<std::int64_t> ratios, s.list("upsampling_ratios"));
    OMNI_TRY(std::vector<std::int64_t> rates, s.list("upsample_rates"));
    if (decoder_dim % (std::int64_t{1} << rates.size()) != 0) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni config: code2wav_config.decoder_dim must halve once per "
                    "upsample_rates entry");
    }
    const std::string p = "code2wav.";
    list.add(p + "code_embedding.weight", {codebook * quantizers, hidden});
    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string layer = p + "pre_transformer.layers." + std::to_string(i) + ".";
        for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
            list.linear(layer + "self_attn." + proj, hidden, hidden, false);
        }
        add_swiglu(list, layer + "mlp.", hidden, ffn);
        list.add(layer + "input_layernorm.weight", {hidden});
        list.add(layer + "post_attention_layernorm.weight", {hidden});
        list.add(layer + "self_attn_layer_scale.scale", {hidden});
        list.add(layer + "mlp_layer_scale.scale", {hidden});
    }
    list.add(p + "pre_transformer.norm.weight", {hidden});
    for (std::size_t j = 0; j < ratios.size(); ++j) {
        const std::string stage = p + "upsample." + std::to_string(j) + ".";
        list.add(stage + "0.conv.weight", {hidden, hidden, ratios[j]});
        list.add(stage + "0.conv.bias", {hidden});
        list.add(stage + "1.dwconv.conv.weight", {hidden, 1, 7});
        list.add(stage + "1.dwconv.conv.bias", {hidden});
        list.layer_norm(stage + "1.norm", hidden);
        list.add(stage + "1.gamma", {hidden});
        list.linear(stage + "1.pwconv1", 4 * hidden, hidden, true);
        list.linear(stage + "1.pwconv2", hidden, 4 * hidden, true);
    }
    add_conv(list, p + "decoder.0", decoder_dim, hidden, 7);
    std::int64_t in = decoder_dim;
    for (std::size_t i = 0; i < rates.size(); ++i) {
        const std::int64_t out = in / 2;
        const std::string block = p + "decoder." + std::to_string(i + 1) + ".block.";
        add_snake(list, block + "0", in);
        list.add(block + "1.conv.weight", {in, out, 2 * rates[i]});
        list.add(block + "1.conv.bias", {out});
        for (int unit = 2; unit <= 4; ++unit) {
            const std::string residual = block + std::to_string(unit) + ".";
            add_snake(list, residual + "act1", out);
            add_snake(list, residual + "act2", out);
            add_conv(list, residual + "conv1", out, out, 7);
            add_conv(list, residual + "conv2", out, out, 1);
        }
        in = out;
    }
    const std::string tail = std::to_string(rates.size() + 1);
    add_snake(list, p + "decoder." + tail, in);
    add_conv(list, p + "decoder." + std::to_string(rates.size() + 2), 1, in, 7);
    return ok_status();
}

// Scales that multiply activations start at 1 in a generated checkpoint; everything else at 0.
bool centred_on_one(const std::string& name) {
    if (name.ends_with("norm.weight") || name.ends_with("layernorm.weight")) return true;
    if (name.ends_with("layer_norm.weight") || name.ends_with("ln_post.weight")) return true;
    if (name.ends_with("ln_q.weight") || name.ends_with(".norm1.weight")) return true;
    return name.ends_with(".norm2.weight");
}

}  // namespace

Result<std::vector<ExpectedTensor>> omni_expected_tensors(const OmniConfig& config) {
    List list;
    OMNI_RETURN_IF_ERROR(add_audio(list, config.audio_config));
    OMNI_RETURN_IF_ERROR(add_vision(list, config.vision_config));
    for (ExpectedTensor& tensor : qwen3::expected_tensors(config.thinker_text, "thinker.")) {
        list.tensors.push_back(std::move(tensor));
    }
    if (config.talker_config.is_object()) {
        OMNI_RETURN_IF_ERROR(
            add_talker(list, config.talker_config, config.thinker_text.hidden_size));
    }
    if (config.code2wav_config.is_object()) {
        OMNI_RETURN_IF_ERROR(add_code2wav(list, config.code2wav_config));
    }
    return std::move(list.tensors);
}

Result<std::vector<checkpoint::TensorSpec>> omni_tensor_specs(const OmniConfig& config,
                                                              DType dtype) {
    OMNI_TRY(std::vector<ExpectedTensor> expected, omni_expected_tensors(config));
    std::vector<checkpoint::TensorSpec> specs;
    specs.reserve(expected.size());
    for (ExpectedTensor& tensor : expected) {
        if (tensor.optional) continue;
        const double mean = centred_on_one(tensor.name) ? 1.0 : 0.0;
        specs.push_back({.name = std::move(tensor.name),
                         .shape = std::move(tensor.shape),
                         .dtype = dtype,
                         .mean = mean});
    }
    return specs;
}

Status check_omni_checkpoint(const OmniConfig& config, const checkpoint::Checkpoint& checkpoint) {
    OMNI_TRY(std::vector<ExpectedTensor> expected, omni_expected_tensors(config));
    return checkpoint::check_tensors_status(checkpoint, expected);
}

}  // namespace omnirt::models::qwen3_omni

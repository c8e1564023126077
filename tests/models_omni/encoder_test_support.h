#pragma once
// Test helpers for the Qwen3-Omni encoders: tiny configs, seeded random float32 weights under
// their checkpoint names, a weight lookup over them, and tolerance checks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/qwen3_omni/audio_encoder.h"
#include "models/qwen3_omni/encoder_config.h"
#include "models/qwen3_omni/vision_encoder.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni::testing {

using WeightMap = std::map<std::string, at::Tensor>;

// Real n_window / n_window_infer / mel bins (the chunking and windows are the point), small widths.
inline AudioEncoderConfig tiny_audio_config() {
    return AudioEncoderConfig{.num_mel_bins = 128,
                              .d_model = 32,
                              .encoder_layers = 2,
                              .encoder_attention_heads = 4,
                              .encoder_ffn_dim = 64,
                              .downsample_hidden_size = 8,
                              .n_window = 50,
                              .n_window_infer = 800,
                              .conv_chunksize = 500,
                              .max_source_positions = 1500,
                              .output_dim = 24};
}

// Real patch geometry and position grid (48 x 48), small widths: head_dim 8.
inline VisionEncoderConfig tiny_vision_config() {
    return VisionEncoderConfig{.depth = 3,
                               .hidden_size = 32,
                               .num_heads = 4,
                               .intermediate_size = 48,
                               .in_channels = 3,
                               .patch_size = 16,
                               .temporal_patch_size = 2,
                               .spatial_merge_size = 2,
                               .num_position_embeddings = 2304,
                               .out_hidden_size = 24,
                               .deepstack_visual_indexes = {0, 2}};
}

// Norm weights 1 + 0.1 N(0, 1), biases 0.1 N(0, 1), other tensors N(0, 1) / sqrt(fan in).
inline at::Tensor random_weight(const std::string& name, std::vector<std::int64_t> shape) {
    const at::Tensor normal = at::randn(shape, at::kFloat);
    const bool vector = shape.size() == 1;
    if (vector && name.find("bias") != std::string::npos) return 0.1 * normal;
    if (vector) return 1.0 + 0.1 * normal;
    std::int64_t fan_in = 1;
    for (std::size_t d = 1; d < shape.size(); ++d) fan_in *= shape[d];
    if (name.find("pos_embed") != std::string::npos) return normal;
    return normal / std::sqrt(static_cast<double>(fan_in));
}

inline void add_linear(WeightMap& map, const std::string& name, std::int64_t out, std::int64_t in,
                       bool bias = true) {
    map[name + ".weight"] = random_weight(name + ".weight", {out, in});
    if (bias) map[name + ".bias"] = random_weight(name + ".bias", {out});
}

inline void add_norm(WeightMap& map, const std::string& name, std::int64_t width) {
    map[name + ".weight"] = random_weight(name + ".weight", {width});
    map[name + ".bias"] = random_weight(name + ".bias", {width});
}

inline WeightMap audio_weights(const AudioEncoderConfig& config, std::uint64_t seed,
                               const std::string& prefix = std::string(kAudioEncoderPrefix)) {
    at::manual_seed(seed);
    WeightMap map;
    const std::int64_t c = config.downsample_hidden_size;
    const std::int64_t d = config.d_model;
    map[prefix + "conv2d1.weight"] = random_weight("conv", {c, 1, 3, 3});
    map[prefix + "conv2d1.bias"] = random_weight("bias", {c});
    for (const char* name : {"conv2d2", "conv2d3"}) {
        map[prefix + name + ".weight"] = random_weight("conv", {c, c, 3, 3});
        map[prefix + name + ".bias"] = random_weight("bias", {c});
    }
    add_linear(map, prefix + "conv_out", d, config.conv_out_features(), false);
    for (std::int64_t i = 0; i < config.encoder_layers; ++i) {
        const std::string layer = prefix + "layers." + std::to_string(i) + ".";
        add_norm(map, layer + "self_attn_layer_norm", d);
        for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
            add_linear(map, layer + "self_attn." + proj, d, d);
        }
        add_norm(map, layer + "final_layer_norm", d);
        add_linear(map, layer + "fc1", config.encoder_ffn_dim, d);
        add_linear(map, layer + "fc2", d, config.encoder_ffn_dim);
    }
    add_norm(map, prefix + "ln_post", d);
    add_linear(map, prefix + "proj1", d, d);
    add_linear(map, prefix + "proj2", config.output_dim, d);
    return map;
}

inline WeightMap vision_weights(const VisionEncoderConfig& config, std::uint64_t seed,
                                const std::string& prefix = std::string(kVisionEncoderPrefix)) {
    at::manual_seed(seed);
    WeightMap map;
    const std::int64_t h = config.hidden_size;
    const std::int64_t merged = config.merged_hidden_size();
    map[prefix + "patch_embed.proj.weight"] = random_weight(
        "patch",
        {h, config.in_channels, config.temporal_patch_size, config.patch_size, config.patch_size});
    map[prefix + "patch_embed.proj.bias"] = random_weight("bias", {h});
    map[prefix + "pos_embed.weight"] =
        random_weight("pos_embed.weight", {config.num_position_embeddings, h});
    for (std::int64_t i = 0; i < config.depth; ++i) {
        const std::string block = prefix + "blocks." + std::to_string(i) + ".";
        add_norm(map, block + "norm1", h);
        add_norm(map, block + "norm2", h);
        add_linear(map, block + "attn.qkv", 3 * h, h);
        add_linear(map, block + "attn.proj", h, h);
        add_linear(map, block + "mlp.linear_fc1", config.intermediate_size, h);
        add_linear(map, block + "mlp.linear_fc2", h, config.intermediate_size);
    }
    auto merger = [&](const std::string& name, std::int64_t norm_width) {
        add_norm(map, name + ".ln_q", norm_width);
        add_linear(map, name + ".mlp.0", merged, merged);
        add_linear(map, name + ".mlp.2", config.out_hidden_size, merged);
    };
    merger(prefix + "merger", h);
    for (std::size_t k = 0; k < config.deepstack_visual_indexes.size(); ++k) {
        merger(prefix + "merger_list." + std::to_string(k), merged);
    }
    return map;
}

inline WeightLookup lookup_of(const WeightMap& weights) {
    return [&weights](const std::string& name) -> Result<Tensor> {
        auto it = weights.find(name);
        if (it == weights.end()) return fail(ErrorCode::not_found, "no tensor named " + name);
        return torch_bridge::from_torch(it->second);
    };
}

// Largest absolute difference, in float64.
inline double max_difference(const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, double tolerance) {
    ASSERT_EQ(actual.sizes(), expected.sizes());
    EXPECT_LE(max_difference(actual, expected), tolerance);
}

}  // namespace omnirt::models::qwen3_omni::testing

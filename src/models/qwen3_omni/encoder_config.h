#pragma once
// The hyper-parameters of Qwen3-Omni's two encoders, read from the checkpoint's config.json:
//   thinker_config.audio_config   (model_type qwen3_omni_moe_audio_encoder): AudioEncoderConfig
//   thinker_config.vision_config  (model_type qwen3_omni_moe_vision_encoder): VisionEncoderConfig
// No libtorch.
//
// transformers' class defaults are those of Qwen2.5-Omni and wrong for the released checkpoint
// (output_dim / out_hidden_size 3584 instead of 2048), so every size the forward depends on is
// required; only keys the released file may lack take a default (listed per field). Accepted
// spellings: audio `encoder_attention_heads` (or `num_attention_heads`), `encoder_layers` (or
// `num_hidden_layers`), `d_model` (or `hidden_size`); vision `in_channels` (or the legacy
// `in_chans`), `patch_size` (or the legacy `spatial_patch_size`), `num_heads` (or
// `num_attention_heads`), `rope_theta` (or `rope_parameters.rope_theta`). Unused legacy keys
// (tokens_per_second, apply_vit_abs_pos_embed, image_size, ...) are ignored.
//
// Errors are invalid_argument naming the key ("Qwen3-Omni audio_config: d_model is missing").
//
// Thread safety: plain values and pure functions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::models::qwen3_omni {

struct AudioEncoderConfig {
    std::int64_t num_mel_bins = 128;
    std::int64_t d_model = 1280;
    std::int64_t encoder_layers = 32;
    std::int64_t encoder_attention_heads = 20;
    std::int64_t encoder_ffn_dim = 5120;
    std::int64_t downsample_hidden_size = 480;  // channels of the three convolutions
    std::int64_t n_window = 50;                 // a conv chunk is 2 * n_window mel frames
    std::int64_t n_window_infer = 800;          // an attention window, in mel frames
    std::int64_t conv_chunksize = 500;          // optional (500): chunks per convolution call
    std::int64_t max_source_positions = 1500;   // optional (1500): rows of the sinusoid table
    std::int64_t output_dim = 2048;
    std::string activation_function = "gelu";  // optional ("gelu"); only gelu is implemented
    bool scale_embedding = false;              // optional (false); true is not implemented

    [[nodiscard]] std::int64_t head_dim() const { return d_model / encoder_attention_heads; }
    [[nodiscard]] std::int64_t chunk_frames() const { return 2 * n_window; }
    // Frequency rows after the three stride-2 convolutions (16 for 128 mel bins).
    [[nodiscard]] std::int64_t conv_frequency_bins() const;
    // conv_out's input width: downsample_hidden_size * conv_frequency_bins() (7680).
    [[nodiscard]] std::int64_t conv_out_features() const;
    // Tokens of a full chunk (13).
    [[nodiscard]] std::int64_t chunk_tokens() const;
    // Tokens per attention window: chunk_tokens() * (n_window_infer / chunk_frames()) (104).
    [[nodiscard]] std::int64_t window_tokens() const;
};

struct VisionEncoderConfig {
    std::int64_t depth = 27;
    std::int64_t hidden_size = 1152;
    std::int64_t num_heads = 16;
    std::int64_t intermediate_size = 4304;
    std::int64_t in_channels = 3;  // optional (3)
    std::int64_t patch_size = 16;
    std::int64_t temporal_patch_size = 2;
    std::int64_t spatial_merge_size = 2;
    std::int64_t num_position_embeddings = 2304;  // a square: 48 x 48 learned grid
    std::int64_t out_hidden_size = 2048;
    std::vector<std::int64_t> deepstack_visual_indexes = {8, 16, 24};
    std::string hidden_act = "gelu_pytorch_tanh";  // optional; gelu_pytorch_tanh or gelu
    double rope_theta = 10000.0;                   // optional (10000; absent from the file)
    double layer_norm_eps = 1e-6;                  // fixed in transformers' modules

    [[nodiscard]] std::int64_t head_dim() const { return hidden_size / num_heads; }
    // in_channels * temporal_patch_size * patch_size^2 (1536): one row of pixel_values.
    [[nodiscard]] std::int64_t patch_features() const;
    // spatial_merge_size^2 (4): patches per thinker token.
    [[nodiscard]] std::int64_t merge_unit() const {
        return spatial_merge_size * spatial_merge_size;
    }
    // hidden_size * merge_unit() (4608): width of a merged token.
    [[nodiscard]] std::int64_t merged_hidden_size() const { return hidden_size * merge_unit(); }
    // Side of the learned position grid (48).
    [[nodiscard]] std::int64_t position_grid_side() const;
};

// Parse a thinker_config.audio_config / vision_config object (then validate()).
[[nodiscard]] Result<AudioEncoderConfig> parse_audio_encoder_config(const nlohmann::json& json);
[[nodiscard]] Result<VisionEncoderConfig> parse_vision_encoder_config(const nlohmann::json& json);

// Both from a whole Qwen3-Omni config.json (thinker_config.audio_config / .vision_config); the
// error names the missing object.
[[nodiscard]] Result<AudioEncoderConfig> audio_encoder_config_of(const nlohmann::json& config);
[[nodiscard]] Result<VisionEncoderConfig> vision_encoder_config_of(const nlohmann::json& config);

// The rules a usable config obeys: positive sizes below generous bounds, heads dividing the
// width, an attention window of at least one chunk, a sinusoid table long enough for a chunk;
// vision: head_dim a multiple of 4 (2-D rotary), a square position grid, deepstack indexes
// distinct and within depth. unimplemented for activations and scale_embedding the forward
// lacks.
[[nodiscard]] Status validate(const AudioEncoderConfig& config);
[[nodiscard]] Status validate(const VisionEncoderConfig& config);

// The config as config.json writes it (every key), for generated checkpoints and tests.
[[nodiscard]] nlohmann::json to_json(const AudioEncoderConfig& config);
[[nodiscard]] nlohmann::json to_json(const VisionEncoderConfig& config);

}  // namespace omnirt::models::qwen3_omni

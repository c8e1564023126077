#pragma once
// The hyper-parameters of Qwen3-Omni's code2wav (the codec decoder that turns the talker's 16
// codes per 80 ms frame into 24 kHz audio), read from config.json's `code2wav_config`, and the
// arithmetic of its output lengths and chunked decoding. No libtorch.
//
// Every size the forward depends on is required: codebook_size, hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, intermediate_size, sliding_window, rms_norm_eps,
// layer_scale_initial_scale, num_quantizers, upsampling_ratios, upsample_rates, decoder_dim.
// rope_theta is required too, as `rope_theta` or `rope_parameters.rope_theta` (transformers v5
// spelling). Optional: hidden_act ("silu", the only one implemented), attention_bias (false; true
// is not implemented: the checkpoint has no attention biases). Unused keys of the released file
// (codebook_dim, semantic_codebook_size, max_position_embeddings, ...) are ignored.
//
// Errors are invalid_argument naming the key ("Qwen3-Omni code2wav_config: decoder_dim is
// missing").
//
// Thread safety: plain values and pure functions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace omnirt::models::qwen3_omni {

struct Code2WavConfig {
    std::int64_t codebook_size = 2048;
    std::int64_t num_quantizers = 16;
    std::int64_t hidden_size = 1024;
    std::int64_t num_hidden_layers = 8;
    std::int64_t num_attention_heads = 16;
    std::int64_t num_key_value_heads = 16;
    std::int64_t intermediate_size = 3072;
    std::int64_t sliding_window = 72;  // a query at i sees keys i - sliding_window < j <= i
    double rope_theta = 10000.0;
    double rms_norm_eps = 1e-5;
    double layer_scale_initial_scale = 0.01;  // informative: the checkpoint holds the scales
    std::vector<std::int64_t> upsampling_ratios = {2, 2};     // before the decoder (k = s = ratio)
    std::vector<std::int64_t> upsample_rates = {8, 5, 4, 3};  // decoder blocks (k = 2r, s = r)
    std::int64_t decoder_dim = 1536;                          // halved by every decoder block

    [[nodiscard]] std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
    // Rows of the shared code embedding table: codebook_size * num_quantizers.
    [[nodiscard]] std::int64_t embedding_rows() const { return codebook_size * num_quantizers; }
    // Channels after the last decoder block: decoder_dim / 2^|upsample_rates| (96).
    [[nodiscard]] std::int64_t output_channels() const;
    // Samples per frame: the product of upsampling_ratios and upsample_rates (1920).
    [[nodiscard]] std::int64_t total_upsample() const;
    // Samples one forward call on `frames` >= 1 frames returns: every CausalTransConv with
    // k = 2r, s = r maps L to (L - 1) * r, one with k = s = r maps L to L * r, so the call loses
    // total_upsample() * frames - output_samples(frames) samples at its end (555 for the
    // released config: 1920 * frames - 555). 0 for frames <= 0.
    [[nodiscard]] std::int64_t output_samples(std::int64_t frames) const;
};

// One call of a chunked decode: frames [begin, end) are new, `context` frames before `begin` are
// decoded with them and their samples dropped.
struct Code2WavChunk {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    std::int64_t context = 0;

    // The frames the call decodes: [begin - context, end).
    [[nodiscard]] std::int64_t first_frame() const { return begin - context; }
    [[nodiscard]] std::int64_t frames() const { return end - first_frame(); }
};

// transformers' chunked_decode rule: chunks of `chunk_size` new frames (the last one shorter),
// each with context = min(left_context, begin). Empty for frames <= 0; chunk_size >= 1 and
// left_context >= 0 are the caller's to check (OMNI_CHECK).
[[nodiscard]] std::vector<Code2WavChunk> code2wav_chunks(std::int64_t frames,
                                                         std::int64_t chunk_size,
                                                         std::int64_t left_context);

// Samples a chunk call keeps: output_samples(chunk.frames()) - chunk.context * total_upsample().
[[nodiscard]] std::int64_t chunk_output_samples(const Code2WavConfig& config,
                                                const Code2WavChunk& chunk);

// Total samples of a chunked decode of `frames` frames (1920 * frames - 555 * chunks for the
// released config).
[[nodiscard]] std::int64_t chunked_output_samples(const Code2WavConfig& config, std::int64_t frames,
                                                  std::int64_t chunk_size,
                                                  std::int64_t left_context);

// Parse a `code2wav_config` object (then validate()).
[[nodiscard]] Result<Code2WavConfig> parse_code2wav_config(const nlohmann::json& json);
// From a whole Qwen3-Omni config.json; the error says when code2wav_config is absent (a
// -Thinking or -Captioner checkpoint without audio output).
[[nodiscard]] Result<Code2WavConfig> code2wav_config_of(const nlohmann::json& config);

// The rules a usable config obeys: positive sizes below generous bounds, heads dividing the width
// into an even head_dim (rotary), key/value heads dividing the heads, non-empty
// upsampling_ratios and upsample_rates of positive factors, decoder_dim divisible by
// 2^|upsample_rates|, one frame giving at least one sample, positive finite eps and rope_theta.
[[nodiscard]] Status validate(const Code2WavConfig& config);

// The config as config.json writes it (the keys above, `rope_theta` spelling).
[[nodiscard]] nlohmann::json to_json(const Code2WavConfig& config);

}  // namespace omnirt::models::qwen3_omni

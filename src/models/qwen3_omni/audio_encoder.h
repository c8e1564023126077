#pragma once
// AudioEncoder: Qwen3-Omni's audio encoder (AuT, `thinker.audio_tower.*`) in libtorch. Log-mel
// features of a batch of audios in, one [audio_output_length(T_i), output_dim] embedding matrix
// per audio out (the rows that replace the audio pad tokens of the thinker prompt).
//
// Forward (transformers' Qwen3OmniMoeAudioEncoder):
//   1. every audio's T_i frames are cut into chunks of 2 * n_window (100) frames (the last one
//      shorter); the chunks of all audios are stacked, right-padded with zeros to the longest
//      chunk: [chunks, 1, mel bins, frames];
//   2. three 3x3 stride-2 conv2d + GELU (in groups of conv_chunksize chunks);
//   3. [chunks, time, channels * freq] (channel-major) -> conv_out (no bias);
//   4. + sinusoid table rows 0..time-1 in every chunk (positions restart per chunk);
//   5. only each chunk's valid rows are kept (audio_chunk_output_length), packed per audio;
//   6. encoder_layers pre-LayerNorm blocks whose attention is bidirectional inside windows of
//      window_tokens() (104) consecutive tokens of one audio (the last window shorter), never
//      across windows or audios;
//   7. ln_post -> proj1 -> GELU -> proj2.
// Chunk padding (AudioChunkPadding): the second and third convolutions read one position past
// the last valid frame of a short chunk, which holds GELU(bias) of the padded frames, not zero,
// so the padding length changes the tail tokens of a short chunk. transformers pads to the
// longest chunk of the batch: 2 * n_window whenever any audio of the batch is at least that long,
// otherwise the longest audio, so its result for an audio shorter than one chunk depends on the
// batch. We pad every chunk to 2 * n_window (full_chunk, the default): the same as transformers
// for every batch holding an audio of at least 1 s, and an audio's result never depends on the
// rest of the batch (up to float rounding of batched kernels); windows never cross audios either.
// longest_in_batch reproduces transformers exactly, for golden tests of short audios.
//
// Weights (prefix `thinker.audio_tower.` by default; shapes from the config):
//   conv2d1.{weight [C, 1, 3, 3], bias [C]}, conv2d2 / conv2d3.{weight [C, C, 3, 3], bias [C]}
//   conv_out.weight [d_model, C * freq]
//   layers.{i}.self_attn.{q,k,v,out}_proj.{weight [d_model, d_model], bias [d_model]}
//   layers.{i}.{self_attn_layer_norm, final_layer_norm}.{weight, bias} [d_model]
//   layers.{i}.fc1.{weight [ffn, d_model], bias}, fc2.{weight [d_model, ffn], bias}
//   ln_post.{weight, bias}, proj1.{weight [d_model, d_model], bias},
//   proj2.{weight [output_dim, d_model], bias}
//
// dtype: the weights are converted once to the compute dtype (float32 or bfloat16; float16 on
// CUDA); activations run in it, as transformers runs the module in the checkpoint's dtype:
// LayerNorm and softmax accumulate in float32 inside, the sinusoid table is made in float32
// and cast. Device: every weight and activation lives on the device given to load().
//
// Thread safety: immutable after load(); forward() may run on several threads at once.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/qwen3_omni/audio_output_length.h"
#include "models/qwen3_omni/encoder_config.h"
#include "models/qwen3_omni/encoder_layers.h"

namespace omnirt::models::qwen3_omni {

inline constexpr std::string_view kAudioEncoderPrefix = "thinker.audio_tower.";

// How chunks shorter than 2 * n_window are padded before the convolutions (see above).
enum class AudioChunkPadding : std::uint8_t { full_chunk, longest_in_batch };

struct AudioEncoderOptions {
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;
    std::string prefix = std::string(kAudioEncoderPrefix);
    AudioChunkPadding chunk_padding = AudioChunkPadding::full_chunk;
};

// The sinusoid position table transformers builds: row p = [sin(p * inv), cos(p * inv)] with
// inv_i = exp(-i * ln(10000) / (channels / 2 - 1)), i < channels / 2; float32 [length, channels].
[[nodiscard]] at::Tensor audio_sinusoid_table(std::int64_t length, std::int64_t channels);

class AudioEncoder {
  public:
    // Reads every weight through `lookup` (errors name the tensor: not_found when absent,
    // invalid_argument for a wrong shape) after validate(config); invalid_argument /
    // unimplemented for a dtype the encoder cannot run (check_encoder_dtype).
    [[nodiscard]] static Result<std::unique_ptr<AudioEncoder>> load(
        const AudioEncoderConfig& config, const WeightLookup& lookup,
        AudioEncoderOptions options = {});

    // mels: one [num_mel_bins, T_i] floating matrix per audio (any device; converted to the
    // encoder's dtype and device), T_i >= 1. Returns, in order, [audio_output_length(T_i),
    // output_dim] per audio in the compute dtype. invalid_argument (naming the audio) for an empty
    // batch or a malformed matrix; internal when libtorch fails.
    [[nodiscard]] Result<std::vector<at::Tensor>> forward(
        const std::vector<at::Tensor>& mels) const;

    [[nodiscard]] const AudioEncoderConfig& config() const { return config_; }
    [[nodiscard]] at::ScalarType dtype() const { return options_.dtype; }
    [[nodiscard]] at::Device device() const { return options_.device; }

    struct Layer {
        LayerNormWeights attention_norm;  // self_attn_layer_norm
        LinearWeights qkv;  // q_proj, k_proj, v_proj rows stacked: [3 * d_model, d_model]
        LinearWeights out_proj;
        LayerNormWeights mlp_norm;  // final_layer_norm
        LinearWeights fc1, fc2;
    };
    struct Weights {
        LinearWeights conv1, conv2, conv3;  // conv weights [C, C_in, 3, 3]
        LinearWeights conv_out;             // no bias
        std::vector<Layer> layers;
        LayerNormWeights ln_post;
        LinearWeights proj1, proj2;
        at::Tensor positions;  // audio_sinusoid_table, float32, on the device
    };

  private:
    AudioEncoder(AudioEncoderConfig config, AudioEncoderOptions options, Weights weights)
        : config_(std::move(config)), options_(std::move(options)), weights_(std::move(weights)) {}

    [[nodiscard]] Status check_input(const std::vector<at::Tensor>& mels) const;
    // Steps 1-5: [total tokens, d_model] of every audio in order.
    [[nodiscard]] at::Tensor embed(const std::vector<at::Tensor>& mels) const;
    void encoder_layer(const Layer& layer, at::Tensor& x,
                       const std::vector<std::int64_t>& windows) const;

    AudioEncoderConfig config_;
    AudioEncoderOptions options_;
    Weights weights_;
};

}  // namespace omnirt::models::qwen3_omni

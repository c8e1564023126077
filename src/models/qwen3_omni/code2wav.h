#pragma once
// Code2Wav: Qwen3-Omni's codec decoder (vocoder, weights `code2wav.*`) in libtorch. The talker's
// codes, 16 per 80 ms frame, in; 24 kHz mono audio in [-1, 1] out.
//
// Forward (transformers' Qwen3OmniMoeCode2Wav), codes [B, Q, T]:
//   1. embed: one shared table of codebook_size * Q rows, row codes[b, q, t] + q * codebook_size;
//      the mean over the Q quantizers -> [B, T, hidden];
//   2. pre-transformer: num_hidden_layers blocks of
//        x += self_attn_layer_scale * o_proj(attention(RMSNorm(x)))
//        x += mlp_layer_scale * down(silu(gate(RMSNorm(x))) * up(RMSNorm(x)))
//      attention causal within a sliding window (query i sees keys i - window < j <= i), 1-D
//      rotate-half RoPE at positions 0..T-1 of the call, no q/k norm, no biases; final RMSNorm;
//   3. per upsampling_ratios entry r: CausalTransConv(k = s = r) then a ConvNeXt block
//      (depthwise causal conv k7 -> LayerNorm eps 1e-6 -> Linear(4x) -> exact GELU -> Linear ->
//      x gamma -> + input);
//   4. decoder: CausalConv(hidden -> decoder_dim, k7); per upsample_rates entry r a block
//      SnakeBeta -> CausalTransConv(C -> C/2, k = 2r, s = r) -> ResidualUnits of dilation 1, 3, 9
//      (SnakeBeta -> CausalConv k7 -> SnakeBeta -> CausalConv k1 -> + input); SnakeBeta ->
//      CausalConv(-> 1 channel, k7); clamp to [-1, 1].
// CausalConv pads (k - 1) * dilation zeros on the left; CausalTransConv drops k - s samples at
// both ends of ConvTranspose1d's output; SnakeBeta(x) = x + sin^2(x * exp(alpha)) /
// (exp(beta) + 1e-9). A call on T frames returns config.output_samples(T) samples
// (1920 * T - 555 for the released config). Every stage is causal, so a call's output is a
// prefix of the output of a call on more frames (up to float rounding).
//
// Weights (prefix `code2wav.`; shapes from the config, C_i = decoder_dim / 2^i):
//   code_embedding.weight [codebook_size * Q, hidden]
//   pre_transformer.layers.{i}.self_attn.{q,k,v,o}_proj.weight,
//     .mlp.{gate,up,down}_proj.weight, .{input,post_attention}_layernorm.weight,
//     .{self_attn,mlp}_layer_scale.scale; pre_transformer.norm.weight
//   upsample.{j}.0.conv.{weight [hidden, hidden, r], bias}
//   upsample.{j}.1.{dwconv.conv.{weight [hidden, 1, 7], bias}, norm.{weight, bias}, gamma,
//     pwconv1.{weight [4 hidden, hidden], bias}, pwconv2.{weight, bias}}
//   decoder.0.conv.{weight [C_0, hidden, 7], bias}
//   decoder.{i+1}.block.0.{alpha, beta} [C_i]; .block.1.conv.{weight [C_i, C_i+1, 2r], bias}
//   decoder.{i+1}.block.{2,3,4}.{act1, act2}.{alpha, beta}, .conv1.conv.{weight [C, C, 7], bias},
//     .conv2.conv.{weight [C, C, 1], bias}
//   decoder.{n+1}.{alpha, beta}; decoder.{n+2}.conv.{weight [1, C_n, 7], bias}
//
// dtype: weights converted once to the compute dtype (float32 or bfloat16; float16 on CUDA),
// activations in it as transformers runs the module in its dtype (RMSNorm and softmax in float32
// inside); the returned audio is float32. Device: every weight and activation lives on the
// device given to load().
//
// Thread safety: immutable after load(); every method may run on several threads at once.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/qwen3_omni/code2wav_config.h"
#include "models/qwen3_omni/encoder_layers.h"

namespace omnirt::models::qwen3_omni {

inline constexpr std::string_view kCode2WavPrefix = "code2wav.";

struct Code2WavOptions {
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;
    std::string prefix = std::string(kCode2WavPrefix);
};

class Code2Wav {
  public:
    // Reads every weight through `lookup` after validate(config); errors name the tensor
    // (not_found when absent, invalid_argument for a wrong shape). invalid_argument /
    // unimplemented for a dtype it cannot run (check_encoder_dtype).
    [[nodiscard]] static Result<std::unique_ptr<Code2Wav>> load(const Code2WavConfig& config,
                                                                const WeightLookup& lookup,
                                                                Code2WavOptions options = {});

    // codes: integer [B, num_quantizers, T], B >= 1, T >= 1, every value in
    // [0, codebook_size), any device. Returns float32 [B, 1, config.output_samples(T)] on the
    // model's device. The sequences of a batch are independent (same length, decoded together).
    // invalid_argument naming the problem for a malformed input; internal when libtorch fails.
    [[nodiscard]] Result<at::Tensor> forward(const at::Tensor& codes) const;

    // One call of a chunked (streaming) decode: `codes` [B, Q, context_frames + new frames] are
    // decoded together and the first context_frames * total_upsample() samples dropped: float32
    // [B, 1, output_samples(T) - context_frames * total_upsample()]. 0 <= context_frames < T.
    // A streaming caller keeps the last left_context frames it has decoded and passes them
    // in front of the new ones (code2wav_chunks() is the rule).
    [[nodiscard]] Result<at::Tensor> decode_chunk(const at::Tensor& codes,
                                                  std::int64_t context_frames) const;

    // transformers' chunked_decode: decode_chunk over code2wav_chunks(T, chunk_size,
    // left_context), concatenated: [B, 1, chunked_output_samples(config, T, chunk_size,
    // left_context)]. chunk_size >= 1, left_context >= 0 (invalid_argument otherwise).
    [[nodiscard]] Result<at::Tensor> chunked_decode(const at::Tensor& codes,
                                                    std::int64_t chunk_size = 300,
                                                    std::int64_t left_context = 25) const;

    // Steps 1-2 only: the pre-transformer's output [B, T, hidden] in the compute dtype (for
    // tests and diagnostics). Same input rules as forward().
    [[nodiscard]] Result<at::Tensor> pre_transformer(const at::Tensor& codes) const;

    [[nodiscard]] const Code2WavConfig& config() const { return config_; }
    [[nodiscard]] at::ScalarType dtype() const { return options_.dtype; }
    [[nodiscard]] at::Device device() const { return options_.device; }

    // A convolution's weight and bias (Conv1d [out, in / groups, k]; ConvTranspose1d
    // [in, out, k]).
    struct Conv {
        at::Tensor weight;
        at::Tensor bias;
    };
    // SnakeBeta with its parameters turned into what the formula multiplies by:
    // frequency = exp(alpha), inverse_magnitude = 1 / (exp(beta) + 1e-9), both [1, C, 1].
    struct Snake {
        at::Tensor frequency;
        at::Tensor inverse_magnitude;
    };
    struct Layer {
        at::Tensor attention_norm;  // input_layernorm.weight
        at::Tensor qkv;             // q_proj, k_proj, v_proj rows stacked
        at::Tensor o_proj;
        at::Tensor attention_scale;  // self_attn_layer_scale.scale
        at::Tensor mlp_norm;         // post_attention_layernorm.weight
        at::Tensor gate_up;          // gate_proj rows, then up_proj rows
        at::Tensor down;
        at::Tensor mlp_scale;  // mlp_layer_scale.scale
    };
    struct ConvNeXt {
        Conv depthwise;  // [hidden, 1, 7]
        LayerNormWeights norm;
        LinearWeights pointwise1, pointwise2;
        at::Tensor gamma;
    };
    struct Upsample {
        std::int64_t ratio = 0;
        Conv transposed;  // k = s = ratio
        ConvNeXt convnext;
    };
    struct ResidualUnit {
        std::int64_t dilation = 1;
        Snake act1;
        Conv conv1;  // k7, dilated
        Snake act2;
        Conv conv2;  // k1
    };
    struct DecoderBlock {
        std::int64_t rate = 0;
        Snake snake;
        Conv transposed;  // k = 2 * rate, s = rate
        std::vector<ResidualUnit> units;
    };
    struct Weights {
        at::Tensor code_embedding;
        at::Tensor code_offsets;  // [1, Q, 1] int64: q * codebook_size
        std::vector<Layer> layers;
        at::Tensor final_norm;
        at::Tensor inverse_frequencies;  // RoPE, float32 [head_dim / 2]
        std::vector<Upsample> upsample;
        Conv decoder_in;
        std::vector<DecoderBlock> blocks;
        Snake decoder_snake;
        Conv decoder_out;
    };

  private:
    Code2Wav(Code2WavConfig config, Code2WavOptions options, Weights weights)
        : config_(std::move(config)), options_(std::move(options)), weights_(std::move(weights)) {}

    // The codes as int64 on the model's device, or invalid_argument.
    [[nodiscard]] Result<at::Tensor> checked_codes(const at::Tensor& codes) const;
    [[nodiscard]] at::Tensor run_pre_transformer(const at::Tensor& codes) const;
    [[nodiscard]] at::Tensor attention(const Layer& layer, const at::Tensor& x,
                                       const at::Tensor& cos, const at::Tensor& sin) const;
    // Steps 1-4 on checked codes: float32 [B, 1, output_samples(T)].
    [[nodiscard]] at::Tensor run(const at::Tensor& codes) const;

    Code2WavConfig config_;
    Code2WavOptions options_;
    Weights weights_;
};

}  // namespace omnirt::models::qwen3_omni

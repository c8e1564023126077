// Code2Wav::load: reads and checks every `code2wav.*` weight (code2wav.h lists them).
#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "models/qwen3_omni/code2wav.h"
#include "torch_bridge/torch_errors.h"

namespace omnirt::models::qwen3_omni {
namespace {

// transformers' SnakeBeta adds this to exp(beta) before dividing.
constexpr double kSnakeEpsilon = 1e-9;
constexpr std::int64_t kDecoderKernel = 7;
constexpr std::int64_t kConvNeXtKernel = 7;
constexpr std::int64_t kResidualDilations[] = {1, 3, 9};

using Conv = Code2Wav::Conv;
using Snake = Code2Wav::Snake;

// name.weight of `shape` and name.bias [out].
Result<Conv> read_conv(const EncoderWeightReader& reader, const std::string& name,
                       const std::vector<std::int64_t>& shape, std::int64_t out,
                       const std::string& meaning) {
    Conv conv;
    OMNI_TRY(conv.weight, reader.get(name + ".weight", shape, meaning));
    OMNI_TRY(conv.bias, reader.get(name + ".bias", {out}, "output channels of " + meaning));
    return conv;
}

// A Conv1d [out, in, k] with bias [out].
Result<Conv> read_conv1d(const EncoderWeightReader& reader, const std::string& name,
                         std::int64_t out, std::int64_t in, std::int64_t kernel,
                         const std::string& meaning) {
    return read_conv(reader, name + ".conv", {out, in, kernel}, out, meaning);
}

// A ConvTranspose1d [in, out, k] with bias [out].
Result<Conv> read_transposed(const EncoderWeightReader& reader, const std::string& name,
                             std::int64_t in, std::int64_t out, std::int64_t kernel,
                             const std::string& meaning) {
    return read_conv(reader, name + ".conv", {in, out, kernel}, out, meaning);
}

Result<Snake> read_snake(const EncoderWeightReader& reader, const std::string& name,
                         std::int64_t channels, const std::string& meaning) {
    OMNI_TRY(const at::Tensor alpha, reader.get(name + ".alpha", {channels}, meaning));
    OMNI_TRY(const at::Tensor beta, reader.get(name + ".beta", {channels}, meaning));
    // The same operations, in the same dtype, as transformers runs on every call.
    return Snake{
        .frequency = at::exp(alpha).view({1, channels, 1}),
        .inverse_magnitude = at::reciprocal(at::exp(beta) + kSnakeEpsilon).view({1, channels, 1})};
}

Result<Code2Wav::Layer> read_layer(const Code2WavConfig& config, const EncoderWeightReader& reader,
                                   std::int64_t index) {
    const std::string prefix = "pre_transformer.layers." + std::to_string(index) + ".";
    const std::int64_t width = config.hidden_size;
    const std::int64_t kv_width = config.num_key_value_heads * config.head_dim();
    const std::int64_t ffn = config.intermediate_size;
    Code2Wav::Layer layer;
    OMNI_TRY(layer.attention_norm,
             reader.get(prefix + "input_layernorm.weight", {width}, "hidden_size"));
    OMNI_TRY(const at::Tensor q,
             reader.get(prefix + "self_attn.q_proj.weight", {width, width}, "hidden_size x2"));
    OMNI_TRY(const at::Tensor k, reader.get(prefix + "self_attn.k_proj.weight", {kv_width, width},
                                            "num_key_value_heads * head_dim, hidden_size"));
    OMNI_TRY(const at::Tensor v, reader.get(prefix + "self_attn.v_proj.weight", {kv_width, width},
                                            "num_key_value_heads * head_dim, hidden_size"));
    OMNI_TRY(layer.o_proj,
             reader.get(prefix + "self_attn.o_proj.weight", {width, width}, "hidden_size x2"));
    OMNI_TRY(layer.attention_scale,
             reader.get(prefix + "self_attn_layer_scale.scale", {width}, "hidden_size"));
    OMNI_TRY(layer.mlp_norm,
             reader.get(prefix + "post_attention_layernorm.weight", {width}, "hidden_size"));
    OMNI_TRY(const at::Tensor gate, reader.get(prefix + "mlp.gate_proj.weight", {ffn, width},
                                               "intermediate_size, hidden_size"));
    OMNI_TRY(const at::Tensor up, reader.get(prefix + "mlp.up_proj.weight", {ffn, width},
                                             "intermediate_size, hidden_size"));
    OMNI_TRY(layer.down, reader.get(prefix + "mlp.down_proj.weight", {width, ffn},
                                    "hidden_size, intermediate_size"));
    OMNI_TRY(layer.mlp_scale, reader.get(prefix + "mlp_layer_scale.scale", {width}, "hidden_size"));
    // One matmul for q, k and v and one for gate and up.
    layer.qkv = at::cat({q, k, v});
    layer.gate_up = at::cat({gate, up});
    return layer;
}

Result<Code2Wav::Upsample> read_upsample(const Code2WavConfig& config,
                                         const EncoderWeightReader& reader, std::size_t index) {
    const std::string prefix = "upsample." + std::to_string(index) + ".";
    const std::int64_t width = config.hidden_size;
    Code2Wav::Upsample stage;
    stage.ratio = config.upsampling_ratios[index];
    OMNI_TRY(stage.transposed, read_transposed(reader, prefix + "0", width, width, stage.ratio,
                                               "hidden_size x2, upsampling_ratios entry"));
    Code2Wav::ConvNeXt& block = stage.convnext;
    OMNI_TRY(block.depthwise, read_conv1d(reader, prefix + "1.dwconv", width, 1, kConvNeXtKernel,
                                          "hidden_size, 1, 7"));
    OMNI_TRY(block.norm, read_layer_norm(reader, prefix + "1.norm", width, "hidden_size"));
    OMNI_TRY(block.pointwise1, read_linear(reader, prefix + "1.pwconv1", 4 * width, width,
                                           "4 * hidden_size, hidden_size"));
    OMNI_TRY(block.pointwise2, read_linear(reader, prefix + "1.pwconv2", width, 4 * width,
                                           "hidden_size, 4 * hidden_size"));
    OMNI_TRY(block.gamma, reader.get(prefix + "1.gamma", {width}, "hidden_size"));
    return stage;
}

Result<Code2Wav::DecoderBlock> read_block(const Code2WavConfig& config,
                                          const EncoderWeightReader& reader, std::size_t index) {
    const std::string prefix = "decoder." + std::to_string(index + 1) + ".block.";
    const std::int64_t in = config.decoder_dim >> index;
    const std::int64_t out = in / 2;
    Code2Wav::DecoderBlock block;
    block.rate = config.upsample_rates[index];
    const std::string channels = "decoder_dim / 2^" + std::to_string(index);
    OMNI_TRY(block.snake, read_snake(reader, prefix + "0", in, channels));
    OMNI_TRY(block.transposed,
             read_transposed(reader, prefix + "1", in, out, 2 * block.rate,
                             channels + ", half of it, 2 * upsample_rates entry"));
    const std::string unit_channels = "decoder_dim / 2^" + std::to_string(index + 1);
    int position = 2;
    for (std::int64_t dilation : kResidualDilations) {
        const std::string unit_prefix = prefix + std::to_string(position++) + ".";
        Code2Wav::ResidualUnit unit;
        unit.dilation = dilation;
        OMNI_TRY(unit.act1, read_snake(reader, unit_prefix + "act1", out, unit_channels));
        OMNI_TRY(unit.conv1, read_conv1d(reader, unit_prefix + "conv1", out, out, kDecoderKernel,
                                         unit_channels + " x2, 7"));
        OMNI_TRY(unit.act2, read_snake(reader, unit_prefix + "act2", out, unit_channels));
        OMNI_TRY(unit.conv2,
                 read_conv1d(reader, unit_prefix + "conv2", out, out, 1, unit_channels + " x2, 1"));
        block.units.push_back(std::move(unit));
    }
    return block;
}

at::Tensor rope_inverse_frequencies(std::int64_t head_dim, double theta, const at::Device& device) {
    // transformers: 1 / theta^(arange(0, d, 2) / d) in float32.
    const at::Tensor exponents =
        at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(head_dim);
    return at::reciprocal(at::pow(theta, exponents)).to(device);
}

}  // namespace

Result<std::unique_ptr<Code2Wav>> Code2Wav::load(const Code2WavConfig& config,
                                                 const WeightLookup& lookup,
                                                 Code2WavOptions options) {
    OMNI_RETURN_IF_ERROR(validate(config));
    OMNI_RETURN_IF_ERROR(check_encoder_dtype("Qwen3-Omni code2wav", options.dtype, options.device));
    const EncoderWeightReader reader(lookup, options.prefix, options.dtype, options.device);
    const std::int64_t width = config.hidden_size;
    Weights weights;
    try {
        OMNI_TRY(weights.code_embedding,
                 reader.get("code_embedding.weight", {config.embedding_rows(), width},
                            "codebook_size * num_quantizers, hidden_size"));
        weights.code_offsets = (at::arange(config.num_quantizers, at::kLong) * config.codebook_size)
                                   .view({1, config.num_quantizers, 1})
                                   .to(options.device);
        for (std::int64_t index = 0; index < config.num_hidden_layers; ++index) {
            OMNI_TRY(Layer layer, read_layer(config, reader, index));
            weights.layers.push_back(std::move(layer));
        }
        OMNI_TRY(weights.final_norm,
                 reader.get("pre_transformer.norm.weight", {width}, "hidden_size"));
        weights.inverse_frequencies =
            rope_inverse_frequencies(config.head_dim(), config.rope_theta, options.device);
        for (std::size_t index = 0; index < config.upsampling_ratios.size(); ++index) {
            OMNI_TRY(Upsample stage, read_upsample(config, reader, index));
            weights.upsample.push_back(std::move(stage));
        }
        OMNI_TRY(weights.decoder_in, read_conv1d(reader, "decoder.0", config.decoder_dim, width,
                                                 kDecoderKernel, "decoder_dim, hidden_size, 7"));
        for (std::size_t index = 0; index < config.upsample_rates.size(); ++index) {
            OMNI_TRY(DecoderBlock block, read_block(config, reader, index));
            weights.blocks.push_back(std::move(block));
        }
        const std::size_t stages = config.upsample_rates.size();
        const std::int64_t channels = config.output_channels();
        OMNI_TRY(weights.decoder_snake,
                 read_snake(reader, "decoder." + std::to_string(stages + 1), channels,
                            "decoder_dim / 2^len(upsample_rates)"));
        OMNI_TRY(weights.decoder_out,
                 read_conv1d(reader, "decoder." + std::to_string(stages + 2), 1, channels,
                             kDecoderKernel, "1, decoder_dim / 2^len(upsample_rates), 7"));
    } catch (const std::exception&) {
        return fail(ErrorCode::resource_exhausted,
                    "Qwen3-Omni code2wav: cannot load: " + torch_bridge::current_exception_text());
    }
    return std::unique_ptr<Code2Wav>(new Code2Wav(config, std::move(options), std::move(weights)));
}

}  // namespace omnirt::models::qwen3_omni

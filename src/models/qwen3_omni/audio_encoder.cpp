#include "models/qwen3_omni/audio_encoder.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "torch_bridge/torch_errors.h"

namespace omnirt::models::qwen3_omni {
namespace {

// torch.nn.LayerNorm's default, which every audio-encoder norm uses.
constexpr double kLayerNormEps = 1e-5;

std::string layer_name(std::int64_t index) { return "layers." + std::to_string(index) + "."; }

Result<AudioEncoder::Layer> read_layer(const AudioEncoderConfig& config,
                                       const EncoderWeightReader& reader, std::int64_t index) {
    const std::string prefix = layer_name(index);
    const std::int64_t width = config.d_model;
    const std::string square = "d_model, d_model";
    AudioEncoder::Layer layer;
    OMNI_TRY(layer.attention_norm,
             read_layer_norm(reader, prefix + "self_attn_layer_norm", width, "d_model"));
    OMNI_TRY(const LinearWeights q,
             read_linear(reader, prefix + "self_attn.q_proj", width, width, square));
    OMNI_TRY(const LinearWeights k,
             read_linear(reader, prefix + "self_attn.k_proj", width, width, square));
    OMNI_TRY(const LinearWeights v,
             read_linear(reader, prefix + "self_attn.v_proj", width, width, square));
    OMNI_TRY(layer.out_proj,
             read_linear(reader, prefix + "self_attn.out_proj", width, width, square));
    OMNI_TRY(layer.mlp_norm,
             read_layer_norm(reader, prefix + "final_layer_norm", width, "d_model"));
    OMNI_TRY(layer.fc1, read_linear(reader, prefix + "fc1", config.encoder_ffn_dim, width,
                                    "encoder_ffn_dim, d_model"));
    OMNI_TRY(layer.fc2, read_linear(reader, prefix + "fc2", width, config.encoder_ffn_dim,
                                    "d_model, encoder_ffn_dim"));
    // One matmul for q, k and v: rows q, then k, then v.
    layer.qkv.weight = at::cat({q.weight, k.weight, v.weight});
    layer.qkv.bias = at::cat({q.bias, k.bias, v.bias});
    return layer;
}

Result<LinearWeights> read_conv(const EncoderWeightReader& reader, const std::string& name,
                                std::int64_t channels, std::int64_t in_channels,
                                const std::string& meaning) {
    LinearWeights conv;
    OMNI_TRY(conv.weight, reader.get(name + ".weight", {channels, in_channels, 3, 3}, meaning));
    OMNI_TRY(conv.bias, reader.get(name + ".bias", {channels}, "downsample_hidden_size"));
    return conv;
}

at::Tensor conv_gelu(const at::Tensor& x, const LinearWeights& conv) {
    return at::gelu(at::conv2d(x, conv.weight, conv.bias, /*stride=*/{2, 2}, /*padding=*/{1, 1}));
}

}  // namespace

at::Tensor audio_sinusoid_table(std::int64_t length, std::int64_t channels) {
    const std::int64_t half = channels / 2;
    const double increment = std::log(10000.0) / static_cast<double>(half - 1);
    const at::Tensor inverse_timescales = at::exp(at::arange(half, at::kFloat) * (-increment));
    const at::Tensor scaled_time =
        at::arange(length, at::kLong).unsqueeze(1) * inverse_timescales.unsqueeze(0);
    return at::cat({at::sin(scaled_time), at::cos(scaled_time)}, 1);
}

Result<std::unique_ptr<AudioEncoder>> AudioEncoder::load(const AudioEncoderConfig& config,
                                                         const WeightLookup& lookup,
                                                         AudioEncoderOptions options) {
    OMNI_RETURN_IF_ERROR(validate(config));
    OMNI_RETURN_IF_ERROR(
        check_encoder_dtype("Qwen3-Omni audio encoder", options.dtype, options.device));
    const EncoderWeightReader reader(lookup, options.prefix, options.dtype, options.device);
    const std::int64_t channels = config.downsample_hidden_size;
    const std::int64_t width = config.d_model;
    Weights weights;
    try {
        OMNI_TRY(weights.conv1,
                 read_conv(reader, "conv2d1", channels, 1, "downsample_hidden_size, 1, 3, 3"));
        OMNI_TRY(weights.conv2, read_conv(reader, "conv2d2", channels, channels,
                                          "downsample_hidden_size x2, 3, 3"));
        OMNI_TRY(weights.conv3, read_conv(reader, "conv2d3", channels, channels,
                                          "downsample_hidden_size x2, 3, 3"));
        OMNI_TRY(weights.conv_out,
                 read_linear(reader, "conv_out", width, config.conv_out_features(),
                             "d_model, downsample_hidden_size * frequency bins after the convs",
                             /*bias=*/false));
        weights.layers.reserve(static_cast<std::size_t>(config.encoder_layers));
        for (std::int64_t index = 0; index < config.encoder_layers; ++index) {
            OMNI_TRY(Layer layer, read_layer(config, reader, index));
            weights.layers.push_back(std::move(layer));
        }
        OMNI_TRY(weights.ln_post, read_layer_norm(reader, "ln_post", width, "d_model"));
        OMNI_TRY(weights.proj1, read_linear(reader, "proj1", width, width, "d_model, d_model"));
        OMNI_TRY(weights.proj2,
                 read_linear(reader, "proj2", config.output_dim, width, "output_dim, d_model"));
        weights.positions =
            audio_sinusoid_table(config.max_source_positions, width).to(options.device);
    } catch (const std::exception&) {
        return fail(ErrorCode::resource_exhausted, "Qwen3-Omni audio encoder: cannot load: " +
                                                       torch_bridge::current_exception_text());
    }
    return std::unique_ptr<AudioEncoder>(
        new AudioEncoder(config, std::move(options), std::move(weights)));
}

Status AudioEncoder::check_input(const std::vector<at::Tensor>& mels) const {
    if (mels.empty()) {
        return fail(ErrorCode::invalid_argument, "Qwen3-Omni audio encoder: no audio given");
    }
    for (std::size_t i = 0; i < mels.size(); ++i) {
        const at::Tensor& mel = mels[i];
        const std::string what = "Qwen3-Omni audio encoder: audio " + std::to_string(i);
        if (!mel.defined() || mel.dim() != 2 || mel.size(0) != config_.num_mel_bins ||
            mel.size(1) < 1) {
            std::string shape = "undefined";
            if (mel.defined()) {
                shape = "[";
                for (std::int64_t d = 0; d < mel.dim(); ++d) {
                    shape += (d > 0 ? ", " : "") + std::to_string(mel.size(d));
                }
                shape += "]";
            }
            return fail(ErrorCode::invalid_argument, what + ": log-mel features must be [" +
                                                         std::to_string(config_.num_mel_bins) +
                                                         ", frames >= 1], not " + shape);
        }
        if (!at::isFloatingType(mel.scalar_type())) {
            return fail(ErrorCode::invalid_argument,
                        what + ": log-mel features must be floating point");
        }
    }
    return ok_status();
}

at::Tensor AudioEncoder::embed(const std::vector<at::Tensor>& mels) const {
    const std::int64_t chunk = config_.chunk_frames();
    const at::TensorOptions options = at::TensorOptions(options_.dtype).device(options_.device);
    std::vector<std::int64_t> chunk_frames;
    for (const at::Tensor& mel : mels) {
        const std::int64_t frames = mel.size(1);
        for (std::int64_t offset = 0; offset < frames; offset += chunk) {
            chunk_frames.push_back(std::min(chunk, frames - offset));
        }
    }
    const auto chunks = static_cast<std::int64_t>(chunk_frames.size());
    const std::int64_t longest = options_.chunk_padding == AudioChunkPadding::full_chunk
                                     ? chunk
                                     : *std::max_element(chunk_frames.begin(), chunk_frames.end());
    // Step 1: [chunks, 1, mel bins, longest], zero right padding.
    at::Tensor padded = at::zeros({chunks, 1, config_.num_mel_bins, longest}, options);
    std::int64_t index = 0;
    for (const at::Tensor& mel : mels) {
        const at::Tensor converted = mel.to(options);
        for (std::int64_t offset = 0; offset < mel.size(1); offset += chunk, ++index) {
            const std::int64_t frames = chunk_frames[static_cast<std::size_t>(index)];
            padded[index][0].narrow(1, 0, frames).copy_(converted.narrow(1, offset, frames));
        }
    }
    // Step 2: the convolutions, conv_chunksize chunks per call (bounds the activations).
    std::vector<at::Tensor> convolved;
    for (std::int64_t first = 0; first < chunks; first += config_.conv_chunksize) {
        const std::int64_t count = std::min(config_.conv_chunksize, chunks - first);
        at::Tensor x = conv_gelu(padded.narrow(0, first, count), weights_.conv1);
        x = conv_gelu(x, weights_.conv2);
        convolved.push_back(conv_gelu(x, weights_.conv3));
    }
    const at::Tensor features = convolved.size() == 1 ? convolved[0] : at::cat(convolved);
    // Step 3: [chunks, time, channels * freq], channel-major, then conv_out.
    const std::int64_t time = features.size(3);
    at::Tensor x =
        linear(features.permute({0, 3, 1, 2}).reshape({chunks, time, -1}), weights_.conv_out);
    // Step 4: positions restart in every chunk.
    x = x + weights_.positions.narrow(0, 0, time).to(options_.dtype).unsqueeze(0);
    // Step 5: each chunk's valid rows, in order.
    std::vector<std::int64_t> rows;
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t valid =
            audio_chunk_output_length(chunk_frames[static_cast<std::size_t>(c)]);
        for (std::int64_t row = 0; row < valid; ++row) rows.push_back(c * time + row);
    }
    const at::Tensor row_index = at::tensor(rows, at::TensorOptions(at::kLong)).to(options_.device);
    return x.reshape({chunks * time, config_.d_model}).index_select(0, row_index);
}

void AudioEncoder::encoder_layer(const Layer& layer, at::Tensor& x,
                                 const std::vector<std::int64_t>& windows) const {
    const std::int64_t tokens = x.size(0);
    const std::int64_t heads = config_.encoder_attention_heads;
    const std::int64_t head_dim = config_.head_dim();
    const std::int64_t width = config_.d_model;
    const at::Tensor qkv = linear(layer_norm(x, layer.attention_norm, kLayerNormEps), layer.qkv);
    auto part = [&](std::int64_t index) {
        return qkv.narrow(1, index * width, width).reshape({tokens, heads, head_dim});
    };
    const at::Tensor attended = segment_attention(part(0), part(1), part(2), windows,
                                                  1.0 / std::sqrt(static_cast<double>(head_dim)));
    x = x + linear(attended, layer.out_proj);
    const at::Tensor hidden =
        at::gelu(linear(layer_norm(x, layer.mlp_norm, kLayerNormEps), layer.fc1));
    x = x + linear(hidden, layer.fc2);
    if (x.scalar_type() == at::kHalf) {
        // transformers clamps float16 activations short of infinity.
        const double limit = 65504.0 - 1000.0;
        x = at::clamp(x, -limit, limit);
    }
}

Result<std::vector<at::Tensor>> AudioEncoder::forward(const std::vector<at::Tensor>& mels) const {
    OMNI_RETURN_IF_ERROR(check_input(mels));
    try {
        c10::NoGradGuard no_grad;
        at::Tensor x = embed(mels);
        // Step 6: windows of window_tokens() tokens inside each audio.
        const std::int64_t window = config_.window_tokens();
        std::vector<std::int64_t> windows;
        std::vector<std::int64_t> tokens;
        for (const at::Tensor& mel : mels) {
            const std::int64_t count = audio_output_length(mel.size(1), config_.n_window);
            tokens.push_back(count);
            for (std::int64_t i = 0; i < count / window; ++i) windows.push_back(window);
            if (count % window != 0) windows.push_back(count % window);
        }
        for (const Layer& layer : weights_.layers) encoder_layer(layer, x, windows);
        // Step 7.
        x = linear(layer_norm(x, weights_.ln_post, kLayerNormEps), weights_.proj1);
        x = linear(at::gelu(x), weights_.proj2);
        std::vector<at::Tensor> outputs;
        outputs.reserve(mels.size());
        std::int64_t start = 0;
        for (std::int64_t count : tokens) {
            outputs.push_back(x.narrow(0, start, count));
            start += count;
        }
        return outputs;
    } catch (const std::exception&) {
        return fail(ErrorCode::internal, "Qwen3-Omni audio encoder: forward failed: " +
                                             torch_bridge::current_exception_text());
    }
}

}  // namespace omnirt::models::qwen3_omni

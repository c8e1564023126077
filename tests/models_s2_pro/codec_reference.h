#pragma once
// An independent whole-clip decode of S2-Pro's codec written from fact sheet section 7 on the
// codec.pth tensors as stored (weight norms folded here, explicit zero left padding, transposed
// convolutions trimmed on the right, the full causal-and-window mask, RoPE on interleaved pairs
// with positions 0 .. T - 1), for comparison with the streaming CodecDecoder.
#include <ATen/ATen.h>

#include <map>
#include <string>

#include "models/s2_pro/codec_weights.h"
#include "s2_pro_test_support.h"

namespace omnirt::models::s2_pro::testing::codec_reference {

// Random codec weights: alpha, norms around 1, the rest 0.1 N(0, 1); see below for g and gammas.
inline WeightMap random_codec(const CodecSizes& sizes, std::uint64_t seed) {
    at::manual_seed(seed);
    WeightMap weights;
    for (const checkpoint::TensorSpec& spec : codec_tensor_specs(sizes, DType::f32)) {
        const at::Tensor noise = at::randn(spec.shape, at::kFloat);
        at::Tensor value = spec.mean == 1.0 ? 1.0 + 0.1 * noise : 0.1 * noise;
        // Residual branches and LayerScales small, as in a trained codec: the random network
        // then stays well conditioned (float32 rounding is not amplified past 1e-5).
        if (spec.name.ends_with("original0") && spec.name.find(".block.") != std::string::npos) {
            value = 0.3 * value;
        }
        if (spec.name.ends_with("_scale.gamma") || spec.name.ends_with(".1.gamma")) {
            value = 0.1 * value;
        }
        weights[spec.name] = value;
    }
    return weights;
}

inline at::Tensor folded(const WeightMap& w, const std::string& g, const std::string& v) {
    const at::Tensor& direction = w.at(v);
    return w.at(g) * direction / direction.pow(2).sum({1, 2}, true).sqrt();
}

inline at::Tensor conv(const WeightMap& w, const std::string& prefix, const at::Tensor& x,
                       std::int64_t dilation = 1) {
    const std::string base = prefix + ".conv.parametrizations.weight.";
    const at::Tensor weight = folded(w, base + "original0", base + "original1");
    const std::int64_t pad = (weight.size(2) - 1) * dilation;
    return at::conv1d(at::constant_pad_nd(x, {pad, 0}), weight, w.at(prefix + ".conv.bias"),
                      at::IntArrayRef(1), at::IntArrayRef(0), at::IntArrayRef(dilation));
}

inline at::Tensor transposed(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             std::int64_t stride) {
    const at::Tensor y = at::conv_transpose1d(x, weight, bias, at::IntArrayRef(stride));
    return y.narrow(2, 0, y.size(2) - (weight.size(2) - stride));
}

inline at::Tensor snake(const at::Tensor& x, const at::Tensor& alpha) {
    return x + 1.0 / (alpha + 1e-9) * at::sin(alpha * x).pow(2);
}

inline at::Tensor transformer(const WeightMap& w, const std::string& prefix, std::int64_t layers,
                              std::int64_t window, const at::Tensor& input) {
    at::Tensor x = input.transpose(1, 2);  // [B, T, C]
    const std::int64_t b = x.size(0), t = x.size(1), c = x.size(2), heads = c / 64;
    const at::Tensor i = at::arange(t, at::kLong).unsqueeze(1), j = at::arange(t, at::kLong);
    const at::Tensor blocked = (j > i) | (j < i - window + 1);
    const at::Tensor positions = at::arange(t, at::kLong);
    auto rope = [&](const at::Tensor& m) {  // [B, T, heads, 64]
        std::vector<at::Tensor> rows;
        for (std::int64_t n = 0; n < b; ++n) {
            rows.push_back(reference::rope_interleaved(m[n], positions, 1e4));
        }
        return at::stack(rows);
    };
    for (std::int64_t l = 0; l < layers; ++l) {
        const std::string layer = prefix + ".layers." + std::to_string(l) + ".";
        const at::Tensor h = reference::rms(x, w.at(layer + "attention_norm.weight"), 1e-5);
        const at::Tensor qkv = at::matmul(h, w.at(layer + "attention.wqkv.weight").t());
        const at::Tensor q = rope(qkv.narrow(2, 0, c).reshape({b, t, heads, 64}));
        const at::Tensor k = rope(qkv.narrow(2, c, c).reshape({b, t, heads, 64}));
        const at::Tensor v = qkv.narrow(2, 2 * c, c).reshape({b, t, heads, 64});
        at::Tensor scores = at::matmul(q.transpose(1, 2), k.transpose(1, 2).transpose(2, 3)) / 8.0;
        scores = scores.masked_fill(blocked, -INFINITY);
        const at::Tensor attended = at::matmul(at::softmax(scores, -1), v.transpose(1, 2))
                                        .transpose(1, 2)
                                        .reshape({b, t, c});
        x = x + at::matmul(attended, w.at(layer + "attention.wo.weight").t()) *
                    w.at(layer + "attention_layer_scale.gamma");
        const at::Tensor f = reference::rms(x, w.at(layer + "ffn_norm.weight"), 1e-5);
        const at::Tensor mlp =
            at::matmul(at::silu(at::matmul(f, w.at(layer + "feed_forward.w1.weight").t())) *
                           at::matmul(f, w.at(layer + "feed_forward.w3.weight").t()),
                       w.at(layer + "feed_forward.w2.weight").t());
        x = x + mlp * w.at(layer + "ffn_layer_scale.gamma");
    }
    return reference::rms(x, w.at(prefix + ".norm.weight"), 1e-5).transpose(1, 2);
}

inline at::Tensor convnext(const WeightMap& w, const std::string& prefix, const at::Tensor& x) {
    at::Tensor y = at::conv1d(at::constant_pad_nd(x, {6, 0}), w.at(prefix + ".dwconv.conv.weight"),
                              w.at(prefix + ".dwconv.conv.bias"), at::IntArrayRef(1),
                              at::IntArrayRef(0), at::IntArrayRef(1), x.size(1));
    y = y.transpose(1, 2);
    y = at::layer_norm(y, {y.size(2)}, w.at(prefix + ".norm.weight"), w.at(prefix + ".norm.bias"),
                       1e-6);
    y = at::linear(
        at::gelu(at::linear(y, w.at(prefix + ".pwconv1.weight"), w.at(prefix + ".pwconv1.bias"))),
        w.at(prefix + ".pwconv2.weight"), w.at(prefix + ".pwconv2.bias"));
    return x + (y * w.at(prefix + ".gamma")).transpose(1, 2);
}

// codes [B, 10, T] int64 -> [B, hop * T].
inline at::Tensor decode(const WeightMap& w, const CodecSizes& s, const at::Tensor& codes) {
    at::Tensor z;
    for (std::int64_t k = 0; k < s.num_codebooks(); ++k) {
        const std::string prefix = k == 0
                                       ? "quantizer.semantic_quantizer.quantizers.0"
                                       : "quantizer.quantizer.quantizers." + std::to_string(k - 1);
        const at::Tensor& codebook = w.at(prefix + ".codebook.weight");
        const at::Tensor ids = codes.select(1, k).clamp(0, codebook.size(0) - 1);
        const at::Tensor rows = codebook.index({ids}).transpose(1, 2);  // [B, 8, T]
        const at::Tensor weight =
            folded(w, prefix + ".out_proj.weight_g", prefix + ".out_proj.weight_v");
        const at::Tensor part = at::conv1d(rows, weight, w.at(prefix + ".out_proj.bias"));
        z = z.defined() ? z + part : part;
    }
    at::Tensor x = transformer(w, "quantizer.post_module", s.transformer_layers, 128, z);
    for (std::int64_t i = 0; i < s.resample_stages; ++i) {
        const std::string stage = "quantizer.upsample." + std::to_string(i);
        x = transposed(x, w.at(stage + ".0.conv.weight"), w.at(stage + ".0.conv.bias"), 2);
        x = convnext(w, stage + ".1", x);
    }
    x = conv(w, "decoder.model.0", x);
    for (std::size_t i = 0; i < s.decoder_rates.size(); ++i) {
        const std::string block = "decoder.model." + std::to_string(i + 1) + ".block.";
        x = snake(x, w.at(block + "0.alpha"));
        const std::string base = block + "1.conv.parametrizations.weight.";
        x = transposed(x, folded(w, base + "original0", base + "original1"),
                       w.at(block + "1.conv.bias"), s.decoder_rates[i]);
        const std::int64_t dilations[] = {1, 3, 9};
        for (int unit = 0; unit < 3; ++unit) {
            const std::string ru = block + std::to_string(unit + 2) + ".block.";
            at::Tensor y = conv(w, ru + "1", snake(x, w.at(ru + "0.alpha")), dilations[unit]);
            y = conv(w, ru + "3", snake(y, w.at(ru + "2.alpha")));
            x = x + y;
        }
    }
    const auto tail = static_cast<std::int64_t>(s.decoder_rates.size());
    x = snake(x, w.at("decoder.model." + std::to_string(tail + 1) + ".alpha"));
    x = conv(w, "decoder.model." + std::to_string(tail + 2), x);
    return at::tanh(x).squeeze(1);
}

// Causal strided conv as fish-speech's CausalConvNet: left pad k - s, right pad to whole strides.
inline at::Tensor strided(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          std::int64_t stride) {
    const std::int64_t k = weight.size(2), left = k - stride, length = x.size(2);
    const double frames = static_cast<double>(length - k + left) / stride + 1;
    const auto ideal = static_cast<std::int64_t>((std::ceil(frames) - 1) * stride + (k - left));
    return at::conv1d(at::constant_pad_nd(x, {left, ideal - length}), weight, bias,
                      at::IntArrayRef(stride));
}

inline at::Tensor residual_unit(const WeightMap& w, const std::string& prefix, const at::Tensor& x,
                                std::int64_t dilation) {
    at::Tensor y =
        conv(w, prefix + ".block.1", snake(x, w.at(prefix + ".block.0.alpha")), dilation);
    return x + conv(w, prefix + ".block.3", snake(y, w.at(prefix + ".block.2.alpha")));
}

// audio [B, N] -> codes [B, 10, ceil(N / hop)].
inline at::Tensor encode(const WeightMap& w, const CodecSizes& s, const at::Tensor& audio) {
    const std::int64_t hop = s.hop(), n = audio.size(1);
    at::Tensor x = at::constant_pad_nd(audio, {0, (n + hop - 1) / hop * hop - n}).unsqueeze(1);
    x = conv(w, "encoder.block.0", x);
    for (std::size_t i = 0; i < s.encoder_rates.size(); ++i) {
        const std::string block = "encoder.block." + std::to_string(i + 1) + ".block.";
        const std::int64_t dilations[] = {1, 3, 9};
        for (int unit = 0; unit < 3; ++unit) {
            x = residual_unit(w, block + std::to_string(unit), x, dilations[unit]);
        }
        x = snake(x, w.at(block + "3.alpha"));
        const std::string base = block + "4.conv.parametrizations.weight.";
        x = strided(x, folded(w, base + "original0", base + "original1"),
                    w.at(block + "4.conv.bias"), s.encoder_rates[i]);
        if (i + 1 == s.encoder_rates.size()) {
            x = transformer(w, block + "5", s.encoder_transformer_layers, 512, x);
        }
    }
    const auto tail = static_cast<std::int64_t>(s.encoder_rates.size());
    x = snake(x, w.at("encoder.block." + std::to_string(tail + 1) + ".alpha"));
    x = conv(w, "encoder.block." + std::to_string(tail + 2), x);
    for (std::int64_t i = 0; i < s.resample_stages; ++i) {
        const std::string stage = "quantizer.downsample." + std::to_string(i);
        x = strided(x, w.at(stage + ".0.conv.weight"), w.at(stage + ".0.conv.bias"), 2);
        x = convnext(w, stage + ".1", x);
    }
    at::Tensor residual = transformer(w, "quantizer.pre_module", s.transformer_layers, 128, x);
    std::vector<at::Tensor> codes;
    for (std::int64_t k = 0; k < s.num_codebooks(); ++k) {
        const std::string prefix = k == 0
                                       ? "quantizer.semantic_quantizer.quantizers.0"
                                       : "quantizer.quantizer.quantizers." + std::to_string(k - 1);
        const at::Tensor e = at::conv1d(
            residual, folded(w, prefix + ".in_proj.weight_g", prefix + ".in_proj.weight_v"),
            w.at(prefix + ".in_proj.bias"));  // [B, 8, T]
        const at::Tensor& codebook = w.at(prefix + ".codebook.weight");
        const at::Tensor en = e.transpose(1, 2) / e.transpose(1, 2).norm(2, {-1}, true);
        const at::Tensor cn = codebook / codebook.norm(2, {-1}, true);
        // DAC's rule: the smallest euclidean distance between the normalised vectors.
        const at::Tensor distance = en.pow(2).sum(-1, true) - 2 * at::matmul(en, cn.t()) +
                                    cn.pow(2).sum(-1).unsqueeze(0).unsqueeze(0);
        const at::Tensor ids = (-distance).argmax(-1);
        codes.push_back(ids);
        const at::Tensor rows = codebook.index({ids}).transpose(1, 2);
        residual = residual - at::conv1d(rows,
                                         folded(w, prefix + ".out_proj.weight_g",
                                                prefix + ".out_proj.weight_v"),
                                         w.at(prefix + ".out_proj.bias"));
    }
    return at::stack(codes, 1);
}

}  // namespace omnirt::models::s2_pro::testing::codec_reference

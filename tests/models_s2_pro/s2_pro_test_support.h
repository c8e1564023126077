#pragma once
// Test helpers for S2-Pro: seeded random fish weights by their checkpoint names, a lookup over
// them, and an independent forward written straight from the fact sheet (interleaved-pair RoPE
// with a bf16 table on the fish weights as stored, no KV cache, no paging, no permutation, no
// fused matrices) that the runtime is compared with.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "models/s2_pro/config.h"
#include "models/s2_pro/weights.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro::testing {

using WeightMap = std::map<std::string, at::Tensor>;

inline S2ProConfig tiny_config() {
    auto config = parse_s2_pro_config(nlohmann::json(*s2_pro_preset("tiny", "float32")));
    OMNI_CHECK(config.has_value(), "tiny preset");
    return *config;
}

// float32: norms 1 + 0.1 N(0, 1), the rest 0.15 N(0, 1) (attention far from uniform).
inline WeightMap random_weights(const S2ProConfig& config, std::uint64_t seed) {
    at::manual_seed(seed);
    WeightMap weights;
    for (const checkpoint::ExpectedTensor& expected : s2_pro_expected_tensors(config)) {
        const bool norm = expected.name.ends_with("norm.weight");
        at::Tensor value = at::randn(expected.shape, at::kFloat);
        weights[expected.name] = norm ? 1.0 + 0.1 * value : 0.15 * value;
    }
    return weights;
}

inline qwen3::WeightLookup lookup_of(const WeightMap& weights) {
    return [&weights](const std::string& name) -> Result<Tensor> {
        auto it = weights.find(name);
        if (it == weights.end()) return fail(ErrorCode::not_found, "no tensor named " + name);
        return torch_bridge::from_torch(it->second);
    };
}

namespace reference {

inline at::Tensor rms(const at::Tensor& x, const at::Tensor& weight, double eps) {
    return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * weight;
}

// Fact sheet 4.4: pairs (2i, 2i + 1), angle = position * theta^(-2i / d) in float32, cos / sin
// rounded to bf16. x [T, heads, d], positions [T].
inline at::Tensor rope_interleaved(const at::Tensor& x, const at::Tensor& positions, double theta) {
    const std::int64_t t = x.size(0), heads = x.size(1), d = x.size(2);
    const at::Tensor inverse =
        1.0 / at::pow(theta, at::arange(0, d, 2, at::kLong).to(at::kFloat) / d);
    const at::Tensor angles = at::outer(positions.to(at::kFloat), inverse);
    const at::Tensor cos = angles.cos().to(at::kBFloat16).to(at::kFloat).view({t, 1, d / 2});
    const at::Tensor sin = angles.sin().to(at::kBFloat16).to(at::kFloat).view({t, 1, d / 2});
    const at::Tensor pairs = x.view({t, heads, d / 2, 2});
    const at::Tensor x0 = pairs.select(3, 0), x1 = pairs.select(3, 1);
    return at::stack({x0 * cos - x1 * sin, x1 * cos + x0 * sin}, 3).view({t, heads, d});
}

// One fish stack over inputs x [T, dim] at positions 0 .. T - 1, causal: the final-normed
// hidden states [T, dim].
inline at::Tensor stack_forward(const WeightMap& w, const std::string& prefix,
                                const FishDecoderConfig& c, at::Tensor x) {
    const std::int64_t t = x.size(0), d = c.head_dim;
    const std::int64_t q_width = c.n_head * d, kv_width = c.n_local_heads * d;
    const at::Tensor positions = at::arange(t, at::kLong);
    const at::Tensor mask = at::ones({t, t}, at::kBool).triu(1);
    for (std::int64_t l = 0; l < c.n_layer; ++l) {
        const std::string layer = prefix + "layers." + std::to_string(l) + ".";
        const at::Tensor h = rms(x, w.at(layer + "attention_norm.weight"), c.norm_eps);
        const at::Tensor qkv = at::matmul(h, w.at(layer + "attention.wqkv.weight").t());
        at::Tensor q = qkv.narrow(1, 0, q_width).reshape({t, c.n_head, d});
        at::Tensor k = qkv.narrow(1, q_width, kv_width).reshape({t, c.n_local_heads, d});
        const at::Tensor v =
            qkv.narrow(1, q_width + kv_width, kv_width).reshape({t, c.n_local_heads, d});
        if (c.attention_qk_norm) {
            q = rms(q, w.at(layer + "attention.q_norm.weight"), c.norm_eps);
            k = rms(k, w.at(layer + "attention.k_norm.weight"), c.norm_eps);
        }
        q = rope_interleaved(q, positions, c.rope_base);
        k = rope_interleaved(k, positions, c.rope_base);
        const std::int64_t group = c.n_head / c.n_local_heads;
        const at::Tensor keys = k.repeat_interleave(group, 1).permute({1, 0, 2});  // [H, T, d]
        const at::Tensor values = v.repeat_interleave(group, 1).permute({1, 0, 2});
        at::Tensor scores = at::matmul(q.permute({1, 0, 2}), keys.transpose(1, 2)) /
                            std::sqrt(static_cast<double>(d));
        scores = scores.masked_fill(mask, -INFINITY);
        const at::Tensor attended =
            at::matmul(at::softmax(scores, -1), values).permute({1, 0, 2}).reshape({t, q_width});
        x = x + at::matmul(attended, w.at(layer + "attention.wo.weight").t());
        const at::Tensor f = rms(x, w.at(layer + "ffn_norm.weight"), c.norm_eps);
        const at::Tensor gate = at::silu(at::matmul(f, w.at(layer + "feed_forward.w1.weight").t()));
        const at::Tensor up = at::matmul(f, w.at(layer + "feed_forward.w3.weight").t());
        x = x + at::matmul(gate * up, w.at(layer + "feed_forward.w2.weight").t());
    }
    return rms(x, w.at(prefix + "norm.weight"), c.norm_eps);
}

// Section 4.3: (E_text[id] + sum_k E_cb[k * 4096 + c_k]) / sqrt(11).
inline at::Tensor frame_embedding(const WeightMap& w, const S2ProConfig& config, std::int64_t id,
                                  const std::vector<std::int64_t>& codes) {
    at::Tensor sum = w.at("text_model.model.embeddings.weight")[id].clone();
    const at::Tensor& table = w.at("audio_decoder.codebook_embeddings.weight");
    for (std::int64_t k = 0; k < config.num_codebooks; ++k) {
        sum += table[k * config.codebook_size + codes[static_cast<std::size_t>(k)]];
    }
    return sum / std::sqrt(static_cast<double>(config.num_codebooks + 1));
}

// Section 5.2, greedy: the codes c_0 .. c_9 of the frame of semantic token s from the slow AR's
// final-normed hidden h [dim]; logits_out (when given) collects the logits of c_1 .. c_9.
inline std::vector<std::int64_t> fast_frame(const WeightMap& w, const S2ProConfig& config,
                                            const at::Tensor& h, std::int64_t s,
                                            std::vector<at::Tensor>* logits_out = nullptr) {
    std::vector<std::int64_t> codes{
        std::clamp<std::int64_t>(s - config.ids.semantic_begin, 0, config.codebook_size - 1)};
    std::vector<at::Tensor> rows{h};
    for (std::int64_t k = 1; k < config.num_codebooks; ++k) {
        rows.push_back(w.at("audio_decoder.embeddings.weight")[codes.back()]);
        const at::Tensor hidden = stack_forward(w, "audio_decoder.", config.audio, at::stack(rows));
        const at::Tensor logits = at::matmul(hidden[-1], w.at("audio_decoder.output.weight").t());
        if (logits_out != nullptr) logits_out->push_back(logits);
        codes.push_back(logits.argmax().item<std::int64_t>());
    }
    return codes;
}

struct Frames {
    std::vector<std::int64_t> tokens;
    std::vector<std::vector<std::int64_t>> codes;
};

// Section 6.1, greedy, without a cache: inputs are the prompt's embeddings (frame embeddings at
// vq positions) then each frame's embedding; stops at <|im_end|> (no frame) or max_frames.
inline Frames generate(const WeightMap& w, const S2ProConfig& config,
                       const std::vector<std::int32_t>& prompt,
                       const std::map<std::int64_t, std::vector<std::int64_t>>& vq,
                       std::int64_t max_frames) {
    const at::Tensor& embeddings = w.at("text_model.model.embeddings.weight");
    std::vector<at::Tensor> inputs;
    for (std::size_t p = 0; p < prompt.size(); ++p) {
        auto it = vq.find(static_cast<std::int64_t>(p));
        inputs.push_back(it == vq.end() ? embeddings[prompt[p]]
                                        : frame_embedding(w, config, prompt[p], it->second));
    }
    const at::Tensor allowed = at::zeros({config.text.vocab_size}, at::kBool);
    allowed.narrow(0, config.ids.semantic_begin, config.codebook_size).fill_(true);
    allowed[config.ids.im_end] = true;
    Frames out;
    for (std::int64_t frame = 0; frame < max_frames; ++frame) {
        const at::Tensor hidden =
            stack_forward(w, "text_model.model.", config.text, at::stack(inputs))[-1];
        const at::Tensor logits =
            at::matmul(hidden, embeddings.t()).masked_fill(~allowed, -INFINITY);
        const std::int64_t s = logits.argmax().item<std::int64_t>();
        out.tokens.push_back(s);
        if (s == config.ids.im_end) break;
        out.codes.push_back(fast_frame(w, config, hidden, s));
        inputs.push_back(frame_embedding(w, config, s, out.codes.back()));
    }
    return out;
}

}  // namespace reference
}  // namespace omnirt::models::s2_pro::testing

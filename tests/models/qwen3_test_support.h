#pragma once
// Test helpers for the Qwen3 model: seeded random weights by Hugging Face name, a weight lookup
// over them, and an independent dense forward written straight from transformers' math (no KV
// cache, no paging, no fused weights, no kernels) that the runner is compared with.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "engine/kv_cache.h"
#include "models/qwen3/config.h"
#include "models/qwen3/qwen3_model.h"
#include "models/qwen3/weights.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3::testing {

using WeightMap = std::map<std::string, at::Tensor>;

inline Qwen3Config tiny_config(bool moe = false) {
    auto config = qwen3_preset("tiny", moe);
    OMNI_CHECK(config.has_value(), "tiny preset");
    return *config;
}

// float32 weights: norms 1 + 0.1 N(0, 1), the rest 0.15 N(0, 1) (large enough that attention and
// routing are far from uniform).
inline WeightMap random_weights(const Qwen3Config& config, std::uint64_t seed,
                                const std::string& prefix = "") {
    at::manual_seed(seed);
    WeightMap weights;
    for (const checkpoint::ExpectedTensor& expected : expected_tensors(config, prefix)) {
        if (expected.optional) continue;  // lm_head of a tied model
        const bool is_norm =
            expected.shape.size() == 1 && expected.name.find("norm") != std::string::npos;
        at::Tensor value = at::randn(expected.shape, at::kFloat);
        value = is_norm ? 1.0 + 0.1 * value : 0.15 * value;
        weights[expected.name] = value;
    }
    return weights;
}

inline WeightLookup lookup_of(const WeightMap& weights) {
    return [&weights](const std::string& name) -> Result<Tensor> {
        auto it = weights.find(name);
        if (it == weights.end()) return fail(ErrorCode::not_found, "no tensor named " + name);
        return torch_bridge::from_torch(it->second);
    };
}

inline std::unique_ptr<Qwen3Model> make_model(const Qwen3Config& config, const WeightMap& weights,
                                              at::ScalarType dtype = at::kFloat) {
    auto model = Qwen3Model::create(config, lookup_of(weights), {.dtype = dtype});
    OMNI_CHECK(model.has_value(), model.has_value() ? "" : model.error().to_string());
    return std::move(*model);
}

inline std::unique_ptr<engine::KVCache> make_cache(const engine::ModelRunner& model,
                                                   std::int64_t num_blocks,
                                                   std::int64_t block_size) {
    auto cache = engine::KVCache::create(model.kv_spec(), num_blocks, block_size);
    OMNI_CHECK(cache.has_value(), "KV cache");
    return std::move(*cache);
}

// Deterministic pseudo-random token ids in [0, vocab).
inline std::vector<std::int32_t> token_ids(std::int64_t count, std::int64_t vocab,
                                           std::uint32_t seed) {
    std::vector<std::int32_t> ids;
    std::uint32_t state = seed * 2654435761u + 12345u;
    for (std::int64_t i = 0; i < count; ++i) {
        state = state * 1664525u + 1013904223u;
        ids.push_back(static_cast<std::int32_t>((state >> 8) % static_cast<std::uint32_t>(vocab)));
    }
    return ids;
}

// The blocks [first, first + count) in order.
inline std::vector<std::int32_t> block_range(std::int32_t first, std::int32_t count) {
    std::vector<std::int32_t> blocks(static_cast<std::size_t>(count));
    std::iota(blocks.begin(), blocks.end(), first);
    return blocks;
}

inline engine::SequenceInput sequence_input(std::string id, std::vector<std::int32_t> tokens,
                                            std::int64_t start,
                                            std::vector<std::int32_t> block_table) {
    engine::SequenceInput input;
    input.request_id = std::move(id);
    input.tokens = std::move(tokens);
    input.start_position = start;
    input.block_table = std::move(block_table);
    return input;
}

inline std::vector<std::int32_t> slice(const std::vector<std::int32_t>& v, std::size_t begin,
                                       std::size_t end) {
    return {v.begin() + static_cast<std::ptrdiff_t>(begin),
            v.begin() + static_cast<std::ptrdiff_t>(end)};
}

// max |a - b| <= relative * max |b| (+ a tiny absolute floor).
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, double relative,
                         const std::string& what = "") {
    ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
    const double scale = expected.abs().max().item<double>();
    const double error =
        (actual.to(at::kFloat) - expected.to(at::kFloat)).abs().max().item<double>();
    EXPECT_LE(error, relative * scale + 1e-6) << what << " (scale " << scale << ")";
}

// ---- The independent dense forward (float32, transformers' formulas). ----

inline at::Tensor reference_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    return weight * (x * at::rsqrt(x.pow(2).mean(-1, true) + eps));
}

inline at::Tensor reference_rotate_half(const at::Tensor& x) {
    const std::int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

inline at::Tensor reference_swiglu(const at::Tensor& x, const at::Tensor& gate,
                                   const at::Tensor& up, const at::Tensor& down) {
    return at::matmul(at::silu(at::matmul(x, gate.t())) * at::matmul(x, up.t()), down.t());
}

// The sparse MoE block as a dense loop: every expert on every token, weighted by the token's
// renormalized top-k probability (0 for experts outside its top k, chosen by sorting on the host).
inline at::Tensor reference_moe(const Qwen3Config& config, const WeightMap& w,
                                const std::string& prefix, const at::Tensor& x) {
    const at::Tensor probabilities =
        at::softmax(at::matmul(x, w.at(prefix + "mlp.gate.weight").t()), -1);
    at::Tensor out = at::zeros_like(x);
    for (std::int64_t t = 0; t < x.size(0); ++t) {
        std::vector<std::pair<float, std::int64_t>> ranked;
        for (std::int64_t e = 0; e < config.num_experts; ++e) {
            ranked.emplace_back(probabilities[t][e].item<float>(), e);
        }
        std::sort(ranked.begin(), ranked.end(), [](auto a, auto b) { return a.first > b.first; });
        float total = 0.0f;
        for (std::int64_t k = 0; k < config.num_experts_per_tok; ++k) total += ranked[k].first;
        for (std::int64_t e = 0; e < config.num_experts; ++e) {
            float weight = 0.0f;
            for (std::int64_t k = 0; k < config.num_experts_per_tok; ++k) {
                if (ranked[k].second == e) {
                    weight = config.norm_topk_prob ? ranked[k].first / total : ranked[k].first;
                }
            }
            const std::string expert = prefix + "mlp.experts." + std::to_string(e) + ".";
            const at::Tensor y = reference_swiglu(x[t], w.at(expert + "gate_proj.weight"),
                                                  w.at(expert + "up_proj.weight"),
                                                  w.at(expert + "down_proj.weight"));
            out[t] += weight * y;
        }
    }
    return out;
}

// Logits [tokens, vocab] of every position of `tokens` (positions 0..n-1).
inline at::Tensor reference_forward(const Qwen3Config& config, const WeightMap& w,
                                    const std::vector<std::int32_t>& tokens) {
    const auto n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t d = config.head_dim;
    const std::int64_t heads = config.num_attention_heads;
    const std::int64_t kv_heads = config.num_key_value_heads;
    const double eps = config.rms_norm_eps;
    std::vector<std::int64_t> ids(tokens.begin(), tokens.end());
    at::Tensor x = w.at("model.embed_tokens.weight").index_select(0, at::tensor(ids, at::kLong));

    const at::Tensor inv_freq =
        1.0 / at::pow(config.rope_theta, at::arange(0, d, 2, at::kLong).to(at::kFloat) / d);
    const at::Tensor freqs = at::outer(at::arange(n, at::kLong).to(at::kFloat), inv_freq);
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    const at::Tensor cos = emb.cos();  // [n, d]
    const at::Tensor sin = emb.sin();
    const at::Tensor causal = at::ones({n, n}, at::kBool).triu(1);

    for (std::int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
        const std::string p = "model.layers." + std::to_string(layer) + ".";
        const at::Tensor h = reference_rms_norm(x, w.at(p + "input_layernorm.weight"), eps);
        at::Tensor q = at::matmul(h, w.at(p + "self_attn.q_proj.weight").t()).view({n, heads, d});
        at::Tensor k =
            at::matmul(h, w.at(p + "self_attn.k_proj.weight").t()).view({n, kv_heads, d});
        at::Tensor v =
            at::matmul(h, w.at(p + "self_attn.v_proj.weight").t()).view({n, kv_heads, d});
        q = reference_rms_norm(q, w.at(p + "self_attn.q_norm.weight"), eps).transpose(0, 1);
        k = reference_rms_norm(k, w.at(p + "self_attn.k_norm.weight"), eps).transpose(0, 1);
        v = v.transpose(0, 1);
        q = q * cos + reference_rotate_half(q) * sin;  // [heads, n, d]
        k = k * cos + reference_rotate_half(k) * sin;
        // repeat_kv: each kv head serves heads / kv_heads consecutive query heads.
        k = k.repeat_interleave(heads / kv_heads, 0);
        v = v.repeat_interleave(heads / kv_heads, 0);
        at::Tensor scores = at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(d));
        scores = scores.masked_fill(causal, -INFINITY);
        const at::Tensor attended =
            at::matmul(at::softmax(scores, -1), v).transpose(0, 1).reshape({n, heads * d});
        x = x + at::matmul(attended, w.at(p + "self_attn.o_proj.weight").t());
        const at::Tensor h2 =
            reference_rms_norm(x, w.at(p + "post_attention_layernorm.weight"), eps);
        if (config.is_sparse_layer(layer)) {
            x = x + reference_moe(config, w, p, h2);
        } else {
            x = x + reference_swiglu(h2, w.at(p + "mlp.gate_proj.weight"),
                                     w.at(p + "mlp.up_proj.weight"),
                                     w.at(p + "mlp.down_proj.weight"));
        }
    }
    x = reference_rms_norm(x, w.at("model.norm.weight"), eps);
    const at::Tensor& head =
        config.tie_word_embeddings ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
    return at::matmul(x, head.t());
}

}  // namespace omnirt::models::qwen3::testing

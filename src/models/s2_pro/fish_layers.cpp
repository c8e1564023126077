#include "models/s2_pro/fish_layers.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::int64_t kInitialPositions = 4096;

std::string shape_text(at::IntArrayRef sizes) {
    std::string out = "[";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(sizes[i]);
    }
    return out + "]";
}

}  // namespace

at::Tensor deinterleave_heads(const at::Tensor& rows, std::int64_t head_dim) {
    const std::int64_t heads = rows.size(0) / head_dim;
    std::vector<std::int64_t> shape{heads, head_dim / 2, 2};
    for (std::int64_t d = 1; d < rows.dim(); ++d) shape.push_back(rows.size(d));
    // [heads, d/2, 2, ...] -> [heads, 2, d/2, ...]: evens first, then odds.
    return rows.reshape(shape).transpose(1, 2).reshape(rows.sizes()).contiguous();
}

qwen3::RotaryTables fish_rotary_tables(const at::Tensor& positions, std::int64_t head_dim,
                                       double theta, at::Device device) {
    // fish-speech precompute_freqs_cis: 1 / base^(arange(0, d, 2)[: d / 2].float() / d).
    const at::Tensor exponents = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / head_dim;
    const at::Tensor inverse = at::pow(theta, exponents).reciprocal();
    const at::Tensor angles = at::outer(positions.to(at::kFloat), inverse);
    const at::Tensor cos = angles.cos().to(at::kBFloat16).to(at::kFloat);
    const at::Tensor sin = angles.sin().to(at::kBFloat16).to(at::kFloat);
    return qwen3::RotaryTables{.cos = at::cat({cos, cos}, 1).to(device),
                               .sin = at::cat({sin, sin}, 1).to(device)};
}

FishRotaryEmbedding::FishRotaryEmbedding(std::int64_t head_dim, double theta,
                                         std::int64_t max_positions, at::Device device)
    : head_dim_(head_dim), max_positions_(max_positions), device_(device), theta_(theta) {}

Result<qwen3::RotaryTables> FishRotaryEmbedding::tables(
    std::span<const engine::SequenceInput> batch, std::int64_t total_tokens) {
    OMNI_TRY(const at::Tensor positions,
             qwen3::batch_positions(batch, total_tokens, /*axes=*/1, max_positions_));
    const at::Tensor row = positions.select(0, 0);
    const std::int64_t needed = total_tokens > 0 ? row.max().item<std::int64_t>() + 1 : 0;
    const std::int64_t cached = cache_.cos.defined() ? cache_.cos.size(0) : 0;
    if (needed > cached) {
        std::int64_t capacity = std::max(cached, kInitialPositions);
        while (capacity < needed) capacity *= 2;
        capacity = std::min(capacity, max_positions_);
        cache_ = fish_rotary_tables(at::arange(capacity, at::kLong), head_dim_, theta_, device_);
    }
    const at::Tensor index = row.to(device_);
    return qwen3::RotaryTables{.cos = cache_.cos.index_select(0, index),
                               .sin = cache_.sin.index_select(0, index)};
}

qwen3::WeightLookup fish_stack_lookup(qwen3::WeightLookup fish, const FishDecoderConfig& config,
                                      std::string fish_prefix) {
    return [fish = std::move(fish), config,
            prefix = std::move(fish_prefix)](const std::string& name) -> Result<Tensor> {
        auto get = [&](const std::string& fish_name) -> Result<at::Tensor> {
            auto tensor = fish(prefix + fish_name);
            if (!tensor) return fail(tensor.error().with_context(prefix + fish_name));
            return torch_bridge::to_torch(*tensor);
        };
        auto give = [](const at::Tensor& tensor) { return torch_bridge::from_torch(tensor); };
        if (name == "model.embed_tokens.weight") return fish(prefix + "embeddings.weight");
        if (name == "model.norm.weight") return fish(prefix + "norm.weight");
        if (name == "lm_head.weight") return fish(prefix + "output.weight");
        const std::string layers = "model.layers.";
        if (!name.starts_with(layers)) {
            return fail(ErrorCode::not_found, "no fish tensor answers '" + name + "'");
        }
        const std::size_t dot = name.find('.', layers.size());
        const std::string index = name.substr(layers.size(), dot - layers.size());
        const std::string rest = name.substr(dot + 1);
        const std::string layer = "layers." + index + ".";
        const std::int64_t d = config.head_dim;
        const std::int64_t q = config.n_head * d;
        const std::int64_t kv = config.n_local_heads * d;
        if (rest == "self_attn.q_proj.weight" || rest == "self_attn.k_proj.weight" ||
            rest == "self_attn.v_proj.weight") {
            OMNI_TRY(at::Tensor wqkv, get(layer + "attention.wqkv.weight"));
            if (wqkv.dim() != 2 || wqkv.size(0) != q + 2 * kv || wqkv.size(1) != config.dim) {
                return fail(ErrorCode::invalid_argument,
                            "weight '" + prefix + layer + "attention.wqkv.weight' has shape " +
                                shape_text(wqkv.sizes()) + ", expected [" +
                                std::to_string(q + 2 * kv) + ", " + std::to_string(config.dim) +
                                "] ((n_head + 2 n_local_heads) head_dim, dim)");
            }
            if (rest[10] == 'q') return give(deinterleave_heads(wqkv.narrow(0, 0, q), d));
            if (rest[10] == 'k') return give(deinterleave_heads(wqkv.narrow(0, q, kv), d));
            return give(wqkv.narrow(0, q + kv, kv).contiguous());
        }
        if (rest == "self_attn.q_norm.weight" || rest == "self_attn.k_norm.weight") {
            const std::string which = rest[10] == 'q' ? "q_norm" : "k_norm";
            OMNI_TRY(at::Tensor norm, get(layer + "attention." + which + ".weight"));
            if (norm.dim() != 1 || norm.size(0) != d) return give(norm);  // the loader says why
            return give(deinterleave_heads(norm, d));
        }
        static const std::pair<const char*, const char*> kRenamed[] = {
            {"self_attn.o_proj.weight", "attention.wo.weight"},
            {"input_layernorm.weight", "attention_norm.weight"},
            {"post_attention_layernorm.weight", "ffn_norm.weight"},
            {"mlp.gate_proj.weight", "feed_forward.w1.weight"},
            {"mlp.up_proj.weight", "feed_forward.w3.weight"},
            {"mlp.down_proj.weight", "feed_forward.w2.weight"}};
        for (const auto& [shared, own] : kRenamed) {
            if (rest == shared) return fish(prefix + layer + own);
        }
        return fail(ErrorCode::not_found, "no fish tensor answers '" + name + "'");
    };
}

}  // namespace omnirt::models::s2_pro

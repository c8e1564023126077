#include "models/s2_pro/s2_pro_model.h"

#include <algorithm>

#include <ATen/ATen.h>

#include <cmath>

#include "models/s2_pro/fish_layers.h"
#include "models/s2_pro/weights.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {

FrameEmbedder::FrameEmbedder(const S2ProConfig& config, at::Tensor text_embeddings,
                             at::Tensor codebook_embeddings)
    : config_(config),
      text_(std::move(text_embeddings)),
      codebooks_(std::move(codebook_embeddings)) {}

at::Tensor FrameEmbedder::embed(const at::Tensor& ids, const at::Tensor& codes) const {
    const at::Device device = text_.device();
    const at::Tensor offsets =
        at::arange(config_.num_codebooks, at::kLong).mul_(config_.codebook_size).to(device);
    const at::Tensor rows = codes.to(device, at::kLong) + offsets.unsqueeze(0);  // [n, K]
    at::Tensor sum = text_.index_select(0, ids.to(device, at::kLong)).to(at::kFloat);
    sum.add_(codebooks_.index_select(0, rows.reshape({-1}))
                 .to(at::kFloat)
                 .view({rows.size(0), config_.num_codebooks, -1})
                 .sum(1));
    return sum.div_(std::sqrt(static_cast<double>(config_.num_codebooks + 1)))
        .to(text_.scalar_type());
}

Result<S2ProModel> load_s2_pro_model(const S2ProConfig& config, const qwen3::WeightLookup& lookup,
                                     at::ScalarType dtype, at::Device device) {
    if (!config.text.attention_qk_norm) {
        return fail(ErrorCode::unimplemented,
                    "S2-Pro slow AR: a text_config without attention_qk_norm is not supported");
    }
    const qwen3::Qwen3Config slow_config = to_qwen3(config.text, config.ids.im_end);
    qwen3::Qwen3ModelOptions options{.dtype = dtype, .device = device};
    options.rotary = std::make_unique<FishRotaryEmbedding>(
        config.text.head_dim, config.text.rope_base, config.text.max_seq_len, device);
    // Only <|im_end|> and the semantic ids are ever sampled (section 4.5): the head computes
    // those 4097 rows instead of the whole 155776-row vocabulary.
    options.logit_rows.push_back(config.ids.im_end);
    for (std::int64_t id = config.ids.semantic_begin; id <= config.ids.semantic_end; ++id) {
        options.logit_rows.push_back(id);
    }
    std::ranges::sort(options.logit_rows);
    options.logit_rows.erase(std::unique(options.logit_rows.begin(), options.logit_rows.end()),
                             options.logit_rows.end());
    OMNI_TRY(auto slow,
             qwen3::Qwen3Model::create(
                 slow_config, fish_stack_lookup(lookup, config.text, std::string(kTextPrefix)),
                 std::move(options)));
    OMNI_TRY(auto fast, FastAr::create(config, lookup, dtype, device));

    const std::string name = std::string(kAudioPrefix) + "codebook_embeddings.weight";
    auto codebooks = lookup(name);
    if (!codebooks) return fail(codebooks.error().with_context("S2-Pro weight"));
    const at::Tensor table = torch_bridge::to_torch(*codebooks);
    const std::vector<std::int64_t> expected{config.num_codebooks * config.codebook_size,
                                             config.text.dim};
    if (table.sizes() != at::IntArrayRef(expected) || !at::isFloatingType(table.scalar_type())) {
        return fail(ErrorCode::invalid_argument,
                    "S2-Pro weight '" + name + "' must be a float tensor [" +
                        std::to_string(expected[0]) + ", " + std::to_string(expected[1]) + "]");
    }
    auto embedder = std::make_shared<const FrameEmbedder>(config, slow->weights().embed_tokens,
                                                          table.to(device, dtype).contiguous());
    return S2ProModel{
        .slow = std::move(slow), .fast = std::move(fast), .embedder = std::move(embedder)};
}

}  // namespace omnirt::models::s2_pro

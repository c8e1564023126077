#include "models/qwen3_omni/code_predictor.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "models/qwen3/layers.h"
#include "models/qwen3_omni/encoder_layers.h"

namespace omnirt::models::qwen3_omni {

Result<std::unique_ptr<CodePredictor>> CodePredictor::create(const TalkerConfig& config,
                                                             const qwen3::WeightLookup& lookup,
                                                             at::Tensor talker_codec_embedding,
                                                             at::ScalarType dtype,
                                                             at::Device device) {
    const std::string prefix = "talker.code_predictor.";
    CodePredictorWeights weights;
    OMNI_TRY(weights.decoder,
             qwen3::load_qwen3_weights(config.predictor, lookup,
                                       {.dtype = dtype,
                                        .device = device,
                                        .prefix = prefix,
                                        .embed_name = "model.codec_embedding.0.weight",
                                        .lm_head_name = "lm_head.0.weight"}));
    const EncoderWeightReader reader(lookup, prefix, dtype, device);
    const std::int64_t vocab = config.predictor.vocab_size;
    const std::int64_t hidden = config.predictor.hidden_size;
    weights.codec_embedding.push_back(weights.decoder.embed_tokens);
    weights.lm_head.push_back(weights.decoder.lm_head);
    weights.lm_head_packed.push_back(weights.decoder.lm_head_packed);
    for (std::int64_t g = 1; g < config.residual_codes(); ++g) {
        const std::string index = std::to_string(g);
        OMNI_TRY(at::Tensor embedding, reader.get("model.codec_embedding." + index + ".weight",
                                                  {vocab, hidden}, "vocab_size, hidden_size"));
        OMNI_TRY(at::Tensor head, reader.get("lm_head." + index + ".weight", {vocab, hidden},
                                             "vocab_size, hidden_size"));
        weights.codec_embedding.push_back(std::move(embedding));
        weights.lm_head_packed.push_back(engine::cpu::PackedWeight::pack(head));
        weights.lm_head.push_back(std::move(head));
    }
    if (talker_codec_embedding.dim() != 2 || talker_codec_embedding.size(1) != hidden) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni code predictor: the talker's codec embedding must be [vocab, " +
                        std::to_string(hidden) + "]");
    }
    return std::unique_ptr<CodePredictor>(new CodePredictor(
        config, std::move(weights), talker_codec_embedding.to(device, dtype), dtype, device));
}

CodePredictor::CodePredictor(const TalkerConfig& config, CodePredictorWeights weights,
                             at::Tensor talker_codec_embedding, at::ScalarType dtype,
                             at::Device device)
    : config_(config.predictor),
      weights_(std::move(weights)),
      talker_codec_embedding_(std::move(talker_codec_embedding)),
      dtype_(dtype),
      device_(device),
      rotary_(static_cast<int>(config.predictor.head_dim), config.predictor.rope_theta,
              config.predictor.max_position_embeddings, device),
      max_length_(config.num_code_groups) {
    engine::SequenceInput all;
    all.tokens.assign(static_cast<std::size_t>(max_length_), 0);
    auto tables = rotary_.tables(std::span(&all, 1), max_length_);
    OMNI_CHECK(tables.has_value(), "code predictor rotary tables");
    cos_ = tables->cos;
    sin_ = tables->sin;
}

int CodePredictor::num_codes() const { return static_cast<int>(weights_.lm_head.size()); }

std::int64_t CodePredictor::vocab_size(int /*depth*/) const { return config_.vocab_size; }

at::Tensor CodePredictor::ids_tensor(std::span<const std::int32_t> ids) const {
    return at::tensor(std::vector<std::int64_t>(ids.begin(), ids.end()), at::kLong).to(device_);
}

Result<at::Tensor> CodePredictor::begin_frame(const at::Tensor& hidden,
                                              std::span<const std::int32_t> tokens) {
    end_frame();
    const auto rows = static_cast<std::int64_t>(tokens.size());
    if (hidden.dim() != 2 || hidden.size(0) != rows || hidden.size(1) != config_.hidden_size) {
        return fail(ErrorCode::invalid_argument, "Qwen3-Omni code predictor: hidden must be [" +
                                                     std::to_string(rows) + ", " +
                                                     std::to_string(config_.hidden_size) + "]");
    }
    for (std::int32_t token : tokens) {
        if (token < 0 || token >= talker_codec_embedding_.size(0)) {
            return fail(ErrorCode::invalid_argument, "Qwen3-Omni code predictor: code " +
                                                         std::to_string(token) +
                                                         " is outside the talker's vocabulary");
        }
    }
    try {
        rows_ = rows;
        const std::int64_t kv_heads = config_.num_key_value_heads;
        const auto options = at::TensorOptions().dtype(dtype_).device(device_);
        for (std::int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
            keys_.push_back(at::empty({rows, kv_heads, max_length_, config_.head_dim}, options));
            values_.push_back(at::empty({rows, kv_heads, max_length_, config_.head_dim}, options));
        }
        const at::Tensor first = hidden.to(device_, dtype_);
        const at::Tensor second = talker_codec_embedding_.index_select(0, ids_tensor(tokens));
        const at::Tensor last = run(at::stack({first, second}, 1), 0);
        return qwen3::project(last, weights_.lm_head[0], {}, weights_.lm_head_packed[0].get())
            .to(at::kFloat);
    } catch (const c10::Error& error) {
        end_frame();
        return fail(ErrorCode::internal,
                    std::string("Qwen3-Omni code predictor: ") + error.what_without_backtrace());
    }
}

Result<at::Tensor> CodePredictor::next(int depth, std::span<const std::int32_t> previous) {
    if (depth < 1 || depth >= num_codes() || keys_.empty() || length_ + 1 > max_length_) {
        return fail(ErrorCode::failed_precondition, "Qwen3-Omni code predictor: next(" +
                                                        std::to_string(depth) +
                                                        ") outside a frame or past its last code");
    }
    if (static_cast<std::int64_t>(previous.size()) != rows_) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni code predictor: one code per row expected");
    }
    for (std::int32_t code : previous) {
        if (code < 0 || code >= config_.vocab_size) {
            return fail(ErrorCode::invalid_argument, "Qwen3-Omni code predictor: code " +
                                                         std::to_string(code) + " out of range");
        }
    }
    try {
        const auto index = static_cast<std::size_t>(depth - 1);
        const at::Tensor x =
            weights_.codec_embedding[index].index_select(0, ids_tensor(previous)).unsqueeze(1);
        const at::Tensor last = run(x, length_);
        const auto head = static_cast<std::size_t>(depth);
        return qwen3::project(last, weights_.lm_head[head], {}, weights_.lm_head_packed[head].get())
            .to(at::kFloat);
    } catch (const c10::Error& error) {
        end_frame();
        return fail(ErrorCode::internal,
                    std::string("Qwen3-Omni code predictor: ") + error.what_without_backtrace());
    }
}

void CodePredictor::end_frame() {
    keys_.clear();
    values_.clear();
    length_ = 0;
    rows_ = 0;
}

at::Tensor CodePredictor::run(at::Tensor x, std::int64_t position) {
    const std::int64_t rows = x.size(0);
    const std::int64_t steps = x.size(1);
    const std::int64_t hidden = config_.hidden_size;
    const std::int64_t heads = config_.num_attention_heads;
    const std::int64_t kv_heads = config_.num_key_value_heads;
    const std::int64_t group = heads / kv_heads;
    const std::int64_t d = config_.head_dim;
    const double eps = config_.rms_norm_eps;
    const std::int64_t end = position + steps;

    // RoPE rows of positions [position, end), the same for every row of the frame.
    auto table = [&](const at::Tensor& full) {
        const at::Tensor part = full.narrow(0, position, steps);
        return rows == 1 ? part : part.repeat({rows, 1});
    };
    const qwen3::RotaryTables rope{.cos = table(cos_), .sin = table(sin_)};
    // Causal mask over [0, end) for the new rows (a single new position sees everything).
    at::Tensor mask;
    if (steps > 1) {
        mask = at::ones({steps, end}, at::TensorOptions().dtype(at::kBool).device(device_))
                   .triu(position + 1)
                   .repeat({group, 1});  // query rows are (group member, step)
    }
    const bool widen = dtype_ != at::kFloat;
    at::Tensor h = x.reshape({rows * steps, hidden}).contiguous();
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (std::size_t layer = 0; layer < weights_.decoder.layers.size(); ++layer) {
        const qwen3::Qwen3LayerWeights& w = weights_.decoder.layers[layer];
        const at::Tensor normed = qwen3::rms_norm(h, w.input_layernorm, eps);
        const at::Tensor qkv = qwen3::project(normed, w.qkv_proj, {}, w.qkv_packed.get());
        at::Tensor q =
            qwen3::rms_norm(qkv.narrow(1, 0, heads * d).reshape({-1, heads, d}), w.q_norm, eps);
        at::Tensor k = qwen3::rms_norm(
            qkv.narrow(1, heads * d, kv_heads * d).reshape({-1, kv_heads, d}), w.k_norm, eps);
        qwen3::apply_rotary(q, rope);
        qwen3::apply_rotary(k, rope);
        // The frame's cache is [R, kv heads, positions, d]: each kv head's rows are contiguous.
        keys_[layer]
            .narrow(2, position, steps)
            .copy_(k.view({rows, steps, kv_heads, d}).transpose(1, 2));
        values_[layer]
            .narrow(2, position, steps)
            .copy_(qkv.narrow(1, (heads + kv_heads) * d, kv_heads * d)
                       .reshape({rows, steps, kv_heads, d})
                       .transpose(1, 2));
        // Queries grouped by their kv head (transformers' repeat_kv order: head = kv * G + g):
        // [R, kv, G * steps, d] against [R, kv, end, d], no copy of the keys per group.
        at::Tensor queries = q.view({rows, steps, kv_heads, group, d})
                                 .permute({0, 2, 3, 1, 4})
                                 .reshape({rows, kv_heads, group * steps, d});
        at::Tensor keys = keys_[layer].narrow(2, 0, end);
        at::Tensor vals = values_[layer].narrow(2, 0, end);
        if (widen) {
            queries = queries.to(at::kFloat);
            keys = keys.to(at::kFloat);
            vals = vals.to(at::kFloat);
        }
        at::Tensor scores = at::matmul(queries, keys.transpose(2, 3)).mul_(scale);
        if (mask.defined()) scores.masked_fill_(mask, -std::numeric_limits<float>::infinity());
        at::Tensor attended = at::matmul(at::softmax(scores, -1), vals);
        if (widen) attended = attended.to(dtype_);
        attended = attended.view({rows, kv_heads, group, steps, d})
                       .permute({0, 3, 1, 2, 4})
                       .reshape({rows * steps, heads * d});
        h.add_(qwen3::project(attended, w.o_proj, {}, w.o_packed.get()));
        const at::Tensor post = qwen3::rms_norm(h, w.post_attention_layernorm, eps);
        h.add_(qwen3::swiglu_mlp(post, w.gate_up_proj, w.down_proj, w.gate_up_packed.get(),
                                 w.down_packed.get()));
    }
    length_ = end;
    const at::Tensor last = h.view({rows, steps, hidden}).select(1, steps - 1);
    return qwen3::rms_norm(last, weights_.decoder.norm, eps);
}

at::Tensor CodePredictor::feedback_sum(std::int32_t c0, std::span<const std::int32_t> codes) const {
    at::Tensor sum = talker_codec_embedding_[c0].clone();
    for (std::size_t g = 0; g < codes.size() && g < weights_.codec_embedding.size(); ++g) {
        sum.add_(weights_.codec_embedding[g][codes[g]]);
    }
    return sum;
}

}  // namespace omnirt::models::qwen3_omni

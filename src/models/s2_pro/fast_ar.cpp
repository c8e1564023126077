#include "models/s2_pro/fast_ar.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>

#include "models/qwen3/layers.h"
#include "models/s2_pro/fish_layers.h"
#include "models/s2_pro/weights.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::string_view kWho = "S2-Pro fast AR";

std::string shape_text(at::IntArrayRef sizes) {
    std::string out = "[";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(sizes[i]);
    }
    return out + "]";
}

class Loader {
  public:
    Loader(const qwen3::WeightLookup& lookup, at::ScalarType dtype, at::Device device)
        : lookup_(lookup), dtype_(dtype), device_(device) {}

    Result<at::Tensor> get(const std::string& name, const std::vector<std::int64_t>& shape) const {
        const std::string full = std::string(kAudioPrefix) + name;
        auto tensor = lookup_(full);
        if (!tensor) return fail(tensor.error().with_context(std::string(kWho) + " weight"));
        const at::Tensor source = torch_bridge::to_torch(*tensor);
        if (!at::isFloatingType(source.scalar_type())) {
            return fail(ErrorCode::invalid_argument,
                        std::string(kWho) + " weight '" + full + "' has a non-floating dtype");
        }
        if (source.sizes() != at::IntArrayRef(shape)) {
            return fail(ErrorCode::invalid_argument,
                        std::string(kWho) + " weight '" + full + "' has shape " +
                            shape_text(source.sizes()) + ", expected " + shape_text(shape));
        }
        return source.to(device_, dtype_).contiguous();
    }

  private:
    const qwen3::WeightLookup& lookup_;
    at::ScalarType dtype_;
    at::Device device_;
};

}  // namespace

Result<std::unique_ptr<FastAr>> FastAr::create(const S2ProConfig& config,
                                               const qwen3::WeightLookup& lookup,
                                               at::ScalarType dtype, at::Device device) {
    const FishDecoderConfig& c = config.audio;
    if (c.attention_qk_norm) {
        return fail(ErrorCode::unimplemented,
                    std::string(kWho) + ": q/k norms in the fast AR are not supported");
    }
    if (dtype != at::kFloat && dtype != at::kBFloat16) {
        return fail(ErrorCode::invalid_argument,
                    std::string(kWho) + ": dtype must be float32 or bfloat16");
    }
    const std::int64_t d = c.head_dim;
    const std::int64_t q = c.n_head * d;
    const std::int64_t kv = c.n_local_heads * d;
    const Loader loader(lookup, dtype, device);
    FastArWeights weights;
    try {
        OMNI_TRY(weights.embeddings, loader.get("embeddings.weight", {c.vocab_size, c.dim}));
        for (std::int64_t l = 0; l < c.n_layer; ++l) {
            const std::string layer = "layers." + std::to_string(l) + ".";
            FastArLayer w;
            OMNI_TRY(w.attention_norm, loader.get(layer + "attention_norm.weight", {c.dim}));
            OMNI_TRY(at::Tensor wqkv,
                     loader.get(layer + "attention.wqkv.weight", {q + 2 * kv, c.dim}));
            w.wqkv =
                at::cat({deinterleave_heads(wqkv.narrow(0, 0, q), d),
                         deinterleave_heads(wqkv.narrow(0, q, kv), d), wqkv.narrow(0, q + kv, kv)})
                    .contiguous();
            OMNI_TRY(w.wo, loader.get(layer + "attention.wo.weight", {c.dim, q}));
            OMNI_TRY(w.ffn_norm, loader.get(layer + "ffn_norm.weight", {c.dim}));
            OMNI_TRY(at::Tensor w1,
                     loader.get(layer + "feed_forward.w1.weight", {c.intermediate_size, c.dim}));
            OMNI_TRY(at::Tensor w3,
                     loader.get(layer + "feed_forward.w3.weight", {c.intermediate_size, c.dim}));
            OMNI_TRY(w.down,
                     loader.get(layer + "feed_forward.w2.weight", {c.dim, c.intermediate_size}));
            w.gate_up = at::cat({w1, w3}).contiguous();
            w.wqkv_packed = engine::cpu::PackedWeight::pack(w.wqkv);
            w.wo_packed = engine::cpu::PackedWeight::pack(w.wo);
            w.gate_up_packed = engine::cpu::PackedWeight::pack(w.gate_up);
            w.down_packed = engine::cpu::PackedWeight::pack(w.down);
            weights.layers.push_back(std::move(w));
        }
        OMNI_TRY(weights.norm, loader.get("norm.weight", {c.dim}));
        if (c.tie_word_embeddings) {
            weights.output = weights.embeddings;
        } else {
            OMNI_TRY(weights.output, loader.get("output.weight", {c.vocab_size, c.dim}));
        }
        weights.output_packed = engine::cpu::PackedWeight::pack(weights.output);
    } catch (const c10::Error& error) {
        return fail(ErrorCode::resource_exhausted,
                    std::string(kWho) + ": cannot load: " + error.what_without_backtrace());
    }
    return std::unique_ptr<FastAr>(new FastAr(config, std::move(weights), dtype, device));
}

FastAr::FastAr(const S2ProConfig& config, FastArWeights weights, at::ScalarType dtype,
               at::Device device)
    : config_(config), weights_(std::move(weights)), dtype_(dtype), device_(device) {
    rotary_ = fish_rotary_tables(at::arange(config_.num_codebooks, at::kLong),
                                 config_.audio.head_dim, config_.audio.rope_base, device_);
}

int FastAr::num_codes() const { return static_cast<int>(config_.num_codebooks); }

std::int64_t FastAr::vocab_size(int /*depth*/) const { return config_.codebook_size; }

Result<at::Tensor> FastAr::codes_tensor(std::span<const std::int32_t> codes) const {
    for (std::int32_t code : codes) {
        if (code < 0 || code >= config_.codebook_size) {
            return fail(ErrorCode::invalid_argument,
                        std::string(kWho) + ": code " + std::to_string(code) + " out of range");
        }
    }
    return at::tensor(std::vector<std::int64_t>(codes.begin(), codes.end()), at::kLong).to(device_);
}

Result<at::Tensor> FastAr::begin_frame(const at::Tensor& hidden,
                                       std::span<const std::int32_t> tokens) {
    const auto rows = static_cast<std::int64_t>(tokens.size());
    if (!keys_.empty()) end_frame();
    if (rows == 0 || hidden.dim() != 2 || hidden.size(0) != rows ||
        hidden.size(1) != config_.audio.dim) {
        return fail(ErrorCode::invalid_argument,
                    std::string(kWho) + ": begin_frame needs one hidden row of width " +
                        std::to_string(config_.audio.dim) + " per token");
    }
    try {
        const FishDecoderConfig& c = config_.audio;
        const auto options = at::TensorOptions().dtype(dtype_).device(device_);
        for (std::int64_t l = 0; l < c.n_layer; ++l) {
            keys_.push_back(
                at::zeros({rows, c.n_local_heads, config_.num_codebooks, c.head_dim}, options));
            values_.push_back(at::zeros_like(keys_.back()));
        }
        rows_ = rows;
        length_ = 0;
        (void)step(hidden.to(device_, dtype_));
        // c_0 is the semantic token's code: the only finite logit.
        at::Tensor logits = at::full({rows, config_.codebook_size},
                                     -std::numeric_limits<float>::infinity(), at::kFloat);
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t code = std::clamp<std::int64_t>(
                tokens[static_cast<std::size_t>(r)] - config_.ids.semantic_begin, 0,
                config_.codebook_size - 1);
            logits[r][code] = 0.0f;
        }
        return logits.to(device_);
    } catch (const c10::Error& error) {
        end_frame();
        return fail(ErrorCode::internal, std::string(kWho) + ": " + error.what_without_backtrace());
    }
}

Result<at::Tensor> FastAr::next(int depth, std::span<const std::int32_t> previous) {
    if (depth < 1 || depth >= num_codes() || keys_.empty() || depth != length_) {
        return fail(ErrorCode::failed_precondition, std::string(kWho) + ": next(" +
                                                        std::to_string(depth) +
                                                        ") outside a frame or out of order");
    }
    if (static_cast<std::int64_t>(previous.size()) != rows_) {
        return fail(ErrorCode::invalid_argument, std::string(kWho) + ": one code per row expected");
    }
    OMNI_TRY(at::Tensor ids, codes_tensor(previous));
    try {
        const at::Tensor last = step(weights_.embeddings.index_select(0, ids));
        return qwen3::project(last, weights_.output, {}, weights_.output_packed.get())
            .to(at::kFloat);
    } catch (const c10::Error& error) {
        end_frame();
        return fail(ErrorCode::internal, std::string(kWho) + ": " + error.what_without_backtrace());
    }
}

void FastAr::end_frame() {
    keys_.clear();
    values_.clear();
    length_ = 0;
    rows_ = 0;
}

at::Tensor FastAr::step(at::Tensor x) {
    const FishDecoderConfig& c = config_.audio;
    const std::int64_t rows = x.size(0);
    const std::int64_t heads = c.n_head;
    const std::int64_t kv_heads = c.n_local_heads;
    const std::int64_t group = heads / kv_heads;
    const std::int64_t d = c.head_dim;
    const std::int64_t position = length_;
    const std::int64_t end = position + 1;
    const qwen3::RotaryTables rope{
        .cos = rotary_.cos.narrow(0, position, 1).expand({rows, -1}).contiguous(),
        .sin = rotary_.sin.narrow(0, position, 1).expand({rows, -1}).contiguous()};
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    at::Tensor h = x.contiguous().clone();
    for (std::size_t l = 0; l < weights_.layers.size(); ++l) {
        const FastArLayer& w = weights_.layers[l];
        const at::Tensor qkv = qwen3::project(qwen3::rms_norm(h, w.attention_norm, c.norm_eps),
                                              w.wqkv, {}, w.wqkv_packed.get());
        at::Tensor q = qkv.narrow(1, 0, heads * d).reshape({rows, heads, d}).contiguous();
        at::Tensor k = qkv.narrow(1, heads * d, kv_heads * d).reshape({rows, kv_heads, d});
        k = k.contiguous();
        qwen3::apply_rotary(q, rope);
        qwen3::apply_rotary(k, rope);
        keys_[l].select(2, position).copy_(k);
        values_[l]
            .select(2, position)
            .copy_(
                qkv.narrow(1, (heads + kv_heads) * d, kv_heads * d).reshape({rows, kv_heads, d}));
        // Queries grouped by kv head (head = kv * group + g): [R, kv, group, d] x [R, kv, d, end].
        const at::Tensor queries = q.view({rows, kv_heads, group, d}).to(at::kFloat);
        const at::Tensor keys = keys_[l].narrow(2, 0, end).to(at::kFloat);
        const at::Tensor vals = values_[l].narrow(2, 0, end).to(at::kFloat);
        const at::Tensor scores = at::matmul(queries, keys.transpose(2, 3)).mul_(scale);
        const at::Tensor attended =
            at::matmul(at::softmax(scores, -1), vals).reshape({rows, heads * d}).to(dtype_);
        h.add_(qwen3::project(attended, w.wo, {}, w.wo_packed.get()));
        h.add_(qwen3::swiglu_mlp(qwen3::rms_norm(h, w.ffn_norm, c.norm_eps), w.gate_up, w.down,
                                 w.gate_up_packed.get(), w.down_packed.get()));
    }
    length_ = end;
    return qwen3::rms_norm(h, weights_.norm, c.norm_eps);
}

}  // namespace omnirt::models::s2_pro

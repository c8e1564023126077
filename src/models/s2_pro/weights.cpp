#include "models/s2_pro/weights.h"

namespace omnirt::models::s2_pro {
namespace {

void add_stack(std::vector<checkpoint::ExpectedTensor>& out, const FishDecoderConfig& c,
               const std::string& prefix) {
    auto add = [&](std::string name, Shape shape) {
        out.push_back({.name = std::move(name), .shape = std::move(shape), .optional = false});
    };
    const std::int64_t q = c.n_head * c.head_dim;
    const std::int64_t kv = c.n_local_heads * c.head_dim;
    for (std::int64_t l = 0; l < c.n_layer; ++l) {
        const std::string layer = prefix + "layers." + std::to_string(l) + ".";
        add(layer + "attention.wqkv.weight", {q + 2 * kv, c.dim});
        add(layer + "attention.wo.weight", {c.dim, q});
        if (c.attention_qk_norm) {
            add(layer + "attention.q_norm.weight", {c.head_dim});
            add(layer + "attention.k_norm.weight", {c.head_dim});
        }
        add(layer + "feed_forward.w1.weight", {c.intermediate_size, c.dim});
        add(layer + "feed_forward.w3.weight", {c.intermediate_size, c.dim});
        add(layer + "feed_forward.w2.weight", {c.dim, c.intermediate_size});
        add(layer + "ffn_norm.weight", {c.dim});
        add(layer + "attention_norm.weight", {c.dim});
    }
    add(prefix + "norm.weight", {c.dim});
}

}  // namespace

std::vector<checkpoint::ExpectedTensor> s2_pro_expected_tensors(const S2ProConfig& config) {
    std::vector<checkpoint::ExpectedTensor> out;
    const std::string text(kTextPrefix);
    const std::string audio(kAudioPrefix);
    const FishDecoderConfig& t = config.text;
    const FishDecoderConfig& a = config.audio;
    out.push_back({.name = text + "embeddings.weight", .shape = {t.vocab_size, t.dim}});
    add_stack(out, t, text);
    if (!t.tie_word_embeddings) {
        out.push_back({.name = text + "output.weight", .shape = {t.vocab_size, t.dim}});
    }
    out.push_back({.name = audio + "codebook_embeddings.weight",
                   .shape = {config.num_codebooks * config.codebook_size, t.dim}});
    out.push_back({.name = audio + "embeddings.weight", .shape = {a.vocab_size, a.dim}});
    add_stack(out, a, audio);
    if (!a.tie_word_embeddings) {
        out.push_back({.name = audio + "output.weight", .shape = {a.vocab_size, a.dim}});
    }
    return out;
}

std::vector<checkpoint::TensorSpec> s2_pro_tensor_specs(const S2ProConfig& config, DType dtype) {
    std::vector<checkpoint::TensorSpec> specs;
    for (checkpoint::ExpectedTensor& tensor : s2_pro_expected_tensors(config)) {
        const bool norm = tensor.name.ends_with("norm.weight");
        specs.push_back({.name = std::move(tensor.name),
                         .shape = std::move(tensor.shape),
                         .dtype = dtype,
                         .mean = norm ? 1.0 : 0.0});
    }
    return specs;
}

std::int64_t s2_pro_parameter_count(const S2ProConfig& config) {
    std::int64_t total = 0;
    for (const checkpoint::ExpectedTensor& tensor : s2_pro_expected_tensors(config)) {
        std::int64_t count = 1;
        for (std::int64_t extent : tensor.shape) count *= extent;
        total += count;
    }
    return total;
}

Status check_s2_pro_checkpoint(const S2ProConfig& config,
                               const checkpoint::Checkpoint& checkpoint) {
    return checkpoint::check_tensors_status(checkpoint, s2_pro_expected_tensors(config));
}

Result<S2ProConfig> load_s2_pro_config(const checkpoint::Checkpoint& checkpoint) {
    auto config = parse_s2_pro_config(checkpoint.config());
    if (!config) {
        return fail(config.error().with_context(
            (checkpoint.directory() / checkpoint::kConfigFile).string()));
    }
    return config;
}

}  // namespace omnirt::models::s2_pro

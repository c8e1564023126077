#include "models/s2_pro/codec_encoder.h"

#include <ATen/ATen.h>

#include "models/s2_pro/codec_layers.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::int64_t kDilations[] = {1, 3, 9};

// F.normalize over the last dim (eps 1e-12).
at::Tensor unit_rows(const at::Tensor& x) {
    return x / x.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
}

std::string quantizer_prefix(std::int64_t k) {
    return k == 0 ? "quantizer.semantic_quantizer.quantizers.0"
                  : "quantizer.quantizer.quantizers." + std::to_string(k - 1);
}

Result<CodecEncoderWeights> load_encoder(const CodecSizes& s, const codec::CodecLoader& loader) {
    CodecEncoderWeights w;
    OMNI_TRY(w.first, loader.weight_normed("encoder.block.0", {s.encoder_dim, 1, 7}));
    std::int64_t dim = s.encoder_dim;
    for (std::size_t i = 0; i < s.encoder_rates.size(); ++i) {
        const std::string block = "encoder.block." + std::to_string(i + 1) + ".block.";
        CodecEncoderStage stage{.units = {}, .alpha = {}, .conv = {}, .stride = s.encoder_rates[i]};
        for (int unit = 0; unit < 3; ++unit) {
            OMNI_TRY(CodecResidualUnit residual,
                     loader.residual_unit(block + std::to_string(unit), dim, kDilations[unit]));
            stage.units.push_back(std::move(residual));
        }
        OMNI_TRY(stage.alpha, loader.get(block + "3.alpha", {1, dim, 1}));
        OMNI_TRY(stage.conv, loader.weight_normed(block + "4", {2 * dim, dim, 2 * stage.stride}));
        w.stages.push_back(std::move(stage));
        dim *= 2;
        if (i + 1 == s.encoder_rates.size() && s.encoder_transformer_layers > 0) {
            OMNI_TRY(w.transformer, loader.transformer(block + "5", s.encoder_transformer_layers,
                                                       dim, 3 * dim, kCodecEncoderWindow));
        }
    }
    const auto tail = static_cast<std::int64_t>(s.encoder_rates.size());
    OMNI_TRY(w.final_alpha,
             loader.get("encoder.block." + std::to_string(tail + 1) + ".alpha", {1, dim, 1}));
    OMNI_TRY(w.last,
             loader.weight_normed("encoder.block." + std::to_string(tail + 2), {s.latent, dim, 3}));
    for (std::int64_t i = 0; i < s.resample_stages; ++i) {
        const std::string stage = "quantizer.downsample." + std::to_string(i);
        CodecConv down;
        OMNI_TRY(down.weight, loader.get(stage + ".0.conv.weight", {s.latent, s.latent, 2}));
        OMNI_TRY(down.bias, loader.get(stage + ".0.conv.bias", {s.latent}));
        w.downsample.push_back(down);
        OMNI_TRY(CodecConvNeXt block,
                 loader.convnext(stage + ".1", s.latent, s.convnext_intermediate));
        w.downsample_convnext.push_back(std::move(block));
    }
    OMNI_TRY(w.pre, loader.transformer("quantizer.pre_module", s.transformer_layers, s.latent,
                                       s.transformer_intermediate, kCodecWindow));
    for (std::int64_t k = 0; k < s.num_codebooks(); ++k) {
        const std::string prefix = quantizer_prefix(k);
        const std::int64_t entries = k == 0 ? s.semantic_codebook_size : s.codebook_size;
        OMNI_TRY(at::Tensor codebook,
                 loader.get(prefix + ".codebook.weight", {entries, s.codebook_dim}));
        w.codebooks.push_back(codebook);
        OMNI_TRY(CodecConv in,
                 loader.legacy_weight_normed(prefix + ".in_proj", {s.codebook_dim, s.latent, 1}));
        w.in_proj.push_back(in);
        OMNI_TRY(CodecConv out,
                 loader.legacy_weight_normed(prefix + ".out_proj", {s.latent, s.codebook_dim, 1}));
        w.out_proj.push_back(out);
    }
    return w;
}

}  // namespace

Result<std::unique_ptr<CodecEncoder>> CodecEncoder::create(const CodecSizes& sizes,
                                                           const qwen3::WeightLookup& lookup,
                                                           at::Device device) {
    if (sizes.encoder_dim <= 0 || sizes.encoder_rates.empty()) {
        return fail(ErrorCode::invalid_argument, "codec: this codec has no encoder");
    }
    const codec::CodecLoader loader(lookup, device);
    try {
        OMNI_TRY(CodecEncoderWeights weights, load_encoder(sizes, loader));
        return std::unique_ptr<CodecEncoder>(new CodecEncoder(sizes, std::move(weights), device));
    } catch (const c10::Error& error) {
        return fail(ErrorCode::internal,
                    std::string("codec: cannot load: ") + error.what_without_backtrace());
    }
}

Result<std::unique_ptr<CodecEncoder>> CodecEncoder::open(const std::filesystem::path& directory,
                                                         at::Device device) {
    OMNI_TRY(codec::CodecFile file, codec::open_codec_file(directory));
    auto encoder = create(file.sizes, file.lookup, device);
    if (!encoder) return fail(encoder.error().with_context(file.path));
    return encoder;
}

CodecEncoder::CodecEncoder(CodecSizes sizes, CodecEncoderWeights weights, at::Device device)
    : sizes_(std::move(sizes)), weights_(std::move(weights)), device_(device) {}

Result<at::Tensor> CodecEncoder::encode(const at::Tensor& input) const {
    if ((input.dim() != 1 && input.dim() != 2) || input.size(-1) == 0 ||
        !at::isFloatingType(input.scalar_type())) {
        return fail(ErrorCode::invalid_argument,
                    "codec: audio must be float samples [batch, samples] or [samples]");
    }
    try {
        at::NoGradGuard no_grad;
        at::Tensor audio = input.dim() == 1 ? input.unsqueeze(0) : input;
        audio = audio.to(device_, at::kFloat);
        if (!at::isfinite(audio).all().item<bool>()) {
            return fail(ErrorCode::invalid_argument, "codec: audio holds NaN or infinite samples");
        }
        const std::int64_t hop = sizes_.hop();
        const std::int64_t samples = audio.size(1);
        const std::int64_t padded = (samples + hop - 1) / hop * hop;
        at::Tensor x = at::constant_pad_nd(audio, {0, padded - samples}).unsqueeze(1);
        at::Tensor carry;
        x = codec::causal_conv(x, weights_.first, carry);
        for (const CodecEncoderStage& stage : weights_.stages) {
            for (const CodecResidualUnit& unit : stage.units) {
                at::Tensor unit_carry;
                x = codec::residual_unit(x, unit, unit_carry);
            }
            x = codec::causal_strided_conv(codec::snake(x, stage.alpha), stage.conv, stage.stride);
        }
        std::vector<at::Tensor> keys, values;
        if (!weights_.transformer.layers.empty()) {
            x = codec::transformer(x, weights_.transformer, 0, keys, values);
        }
        at::Tensor last_carry;
        x = codec::causal_conv(codec::snake(x, weights_.final_alpha), weights_.last, last_carry);
        for (std::size_t i = 0; i < weights_.downsample.size(); ++i) {
            x = codec::causal_strided_conv(x, weights_.downsample[i], 2);
            at::Tensor convnext_carry;
            x = codec::convnext(x, weights_.downsample_convnext[i], convnext_carry);
        }
        keys.clear();
        values.clear();
        at::Tensor residual =
            codec::transformer(x, weights_.pre, 0, keys, values).transpose(1, 2);  // [B, T, latent]
        std::vector<at::Tensor> codes;
        for (std::size_t k = 0; k < weights_.codebooks.size(); ++k) {
            const CodecConv& in = weights_.in_proj[k];
            const CodecConv& out = weights_.out_proj[k];
            const at::Tensor e = at::linear(residual, in.weight.squeeze(2), in.bias);
            const at::Tensor scores =
                at::matmul(unit_rows(e), unit_rows(weights_.codebooks[k]).t());
            const at::Tensor ids = scores.argmax(-1);  // [B, T]
            codes.push_back(ids);
            const at::Tensor rows = weights_.codebooks[k]
                                        .index_select(0, ids.reshape({-1}))
                                        .view({ids.size(0), ids.size(1), -1});
            // The semantic stage quantizes z; the residual stages what it left (section 7.4).
            residual = residual - at::linear(rows, out.weight.squeeze(2), out.bias);
        }
        return at::stack(codes, 1).to(at::kCPU);
    } catch (const c10::Error& error) {
        return fail(ErrorCode::internal, std::string("codec: ") + error.what_without_backtrace());
    }
}

}  // namespace omnirt::models::s2_pro

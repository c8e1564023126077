#include "models/s2_pro/codec_decoder.h"

#include <ATen/ATen.h>

#include "models/s2_pro/codec_layers.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::int64_t kDilations[] = {1, 3, 9};

Result<CodecDecoderWeights> load_decoder(const CodecSizes& s, const codec::CodecLoader& loader) {
    CodecDecoderWeights w;
    const std::int64_t latent = s.latent;
    for (std::int64_t k = 0; k < s.num_codebooks(); ++k) {
        const std::string prefix = k == 0
                                       ? "quantizer.semantic_quantizer.quantizers.0"
                                       : "quantizer.quantizer.quantizers." + std::to_string(k - 1);
        const std::int64_t entries = k == 0 ? s.semantic_codebook_size : s.codebook_size;
        OMNI_TRY(at::Tensor codebook,
                 loader.get(prefix + ".codebook.weight", {entries, s.codebook_dim}));
        w.codebooks.push_back(codebook);
        OMNI_TRY(CodecConv out,
                 loader.legacy_weight_normed(prefix + ".out_proj", {latent, s.codebook_dim, 1}));
        w.out_proj.push_back(out);
    }
    OMNI_TRY(w.post, loader.transformer("quantizer.post_module", s.transformer_layers, latent,
                                        s.transformer_intermediate, kCodecWindow));
    for (std::int64_t i = 0; i < s.resample_stages; ++i) {
        const std::string stage = "quantizer.upsample." + std::to_string(i);
        CodecConv up;
        OMNI_TRY(up.weight, loader.get(stage + ".0.conv.weight", {latent, latent, 2}));
        OMNI_TRY(up.bias, loader.get(stage + ".0.conv.bias", {latent}));
        w.upsample.push_back(codec::transposed_as_conv(up, 2));
        OMNI_TRY(CodecConvNeXt block,
                 loader.convnext(stage + ".1", latent, s.convnext_intermediate));
        w.upsample_convnext.push_back(std::move(block));
    }
    OMNI_TRY(w.first, loader.weight_normed("decoder.model.0", {s.decoder_dim, latent, 7}));
    std::int64_t channels = s.decoder_dim;
    for (std::size_t i = 0; i < s.decoder_rates.size(); ++i) {
        const std::string block = "decoder.model." + std::to_string(i + 1) + ".block.";
        const std::int64_t next = channels / 2;
        CodecDecoderStage stage{
            .alpha = {}, .transposed = {}, .stride = s.decoder_rates[i], .units = {}};
        OMNI_TRY(stage.alpha, loader.get(block + "0.alpha", {1, channels, 1}));
        OMNI_TRY(CodecConv transposed,
                 loader.weight_normed(block + "1", {channels, next, 2 * stage.stride}, 1, true));
        stage.transposed = codec::transposed_as_conv(transposed, stage.stride);
        for (int unit = 0; unit < 3; ++unit) {
            OMNI_TRY(
                CodecResidualUnit residual,
                loader.residual_unit(block + std::to_string(unit + 2), next, kDilations[unit]));
            stage.units.push_back(std::move(residual));
        }
        w.stages.push_back(std::move(stage));
        channels = next;
    }
    const auto tail = static_cast<std::int64_t>(s.decoder_rates.size());
    OMNI_TRY(w.final_alpha,
             loader.get("decoder.model." + std::to_string(tail + 1) + ".alpha", {1, channels, 1}));
    OMNI_TRY(w.last,
             loader.weight_normed("decoder.model." + std::to_string(tail + 2), {1, channels, 7}));
    return w;
}

void convert(CodecConv& conv, at::ScalarType dtype) {
    conv.weight = conv.weight.to(dtype);
    conv.bias = conv.bias.to(dtype);
}

// Everything after the post_module to the compute dtype but the Snake alphas (read as float32
// by the Snake kernel).
void convert_decoder(CodecDecoderWeights& w, at::ScalarType dtype) {
    if (dtype == at::kFloat) return;
    for (CodecConv& conv : w.upsample) convert(conv, dtype);
    for (CodecConvNeXt& block : w.upsample_convnext) {
        convert(block.dwconv, dtype);
        for (at::Tensor* tensor :
             {&block.norm_weight, &block.norm_bias, &block.pw1_weight, &block.pw1_bias,
              &block.pw2_weight, &block.pw2_bias, &block.gamma}) {
            *tensor = tensor->to(dtype);
        }
    }
    convert(w.first, dtype);
    for (CodecDecoderStage& stage : w.stages) {
        convert(stage.transposed, dtype);
        for (CodecResidualUnit& unit : stage.units) {
            convert(unit.conv1, dtype);
            convert(unit.conv2, dtype);
        }
    }
    convert(w.last, dtype);
}

}  // namespace

Result<std::unique_ptr<CodecDecoder>> CodecDecoder::create(const CodecSizes& sizes,
                                                           const qwen3::WeightLookup& lookup,
                                                           CodecDecoderOptions options) {
    if (sizes.latent % kCodecHeadDim != 0 ||
        sizes.decoder_dim % (1 << sizes.decoder_rates.size()) != 0) {
        return fail(ErrorCode::invalid_argument,
                    "codec: the latent width must divide by 64 and the decoder's by 2 per stage");
    }
    if (options.dtype != at::kFloat && options.dtype != at::kBFloat16) {
        return fail(ErrorCode::invalid_argument, "codec: the decoder runs in float32 or bfloat16");
    }
    const codec::CodecLoader loader(lookup, options.device);
    try {
        OMNI_TRY(CodecDecoderWeights weights, load_decoder(sizes, loader));
        convert_decoder(weights, options.dtype);
        return std::unique_ptr<CodecDecoder>(new CodecDecoder(sizes, std::move(weights), options));
    } catch (const c10::Error& error) {
        return fail(ErrorCode::internal,
                    std::string("codec: cannot load: ") + error.what_without_backtrace());
    }
}

Result<std::unique_ptr<CodecDecoder>> CodecDecoder::open(const std::filesystem::path& directory,
                                                         CodecDecoderOptions options) {
    OMNI_TRY(codec::CodecFile file, codec::open_codec_file(directory));
    auto decoder = create(file.sizes, file.lookup, options);
    if (!decoder) return fail(decoder.error().with_context(file.path));
    return decoder;
}

CodecDecoder::CodecDecoder(CodecSizes sizes, CodecDecoderWeights weights,
                           CodecDecoderOptions options)
    : sizes_(std::move(sizes)), weights_(std::move(weights)), options_(options) {}

CodecDecoder::DecodeState CodecDecoder::new_state(std::int64_t batch) const {
    return DecodeState{.batch = batch, .frames = 0, .carry = {}, .keys = {}, .values = {}};
}

Result<at::Tensor> CodecDecoder::decode(const at::Tensor& codes) const {
    if (codes.dim() != 3) {
        return fail(ErrorCode::invalid_argument, "codec: codes must be [batch, codebooks, frames]");
    }
    DecodeState state = new_state(codes.size(0));
    return decode_chunk(state, codes);
}

Result<at::Tensor> CodecDecoder::decode_chunk(DecodeState& state, const at::Tensor& codes) const {
    if (codes.dim() != 3 || codes.size(0) != state.batch ||
        codes.size(1) != sizes_.num_codebooks() || at::isFloatingType(codes.scalar_type())) {
        return fail(ErrorCode::invalid_argument,
                    "codec: codes must be integers [" + std::to_string(state.batch) + ", " +
                        std::to_string(sizes_.num_codebooks()) + ", frames]");
    }
    if (codes.size(2) == 0) {
        return at::zeros({state.batch, 0}, at::TensorOptions().dtype(at::kFloat));
    }
    try {
        at::NoGradGuard no_grad;
        return run(state, codes.to(options_.device, at::kLong));
    } catch (const c10::Error& error) {
        return fail(ErrorCode::internal, std::string("codec: ") + error.what_without_backtrace());
    }
}

at::Tensor CodecDecoder::run(DecodeState& state, const at::Tensor& codes) const {
    const std::int64_t frames = codes.size(2);
    // VQ decode: z = sum_k out_proj_k(codebook_k[c_k]), codes clamped to each codebook.
    at::Tensor z;
    for (std::size_t k = 0; k < weights_.codebooks.size(); ++k) {
        const at::Tensor& codebook = weights_.codebooks[k];
        const at::Tensor ids = codes.select(1, static_cast<std::int64_t>(k))
                                   .clamp(0, codebook.size(0) - 1)
                                   .reshape({-1});
        const at::Tensor rows = codebook.index_select(0, ids).view({state.batch, frames, -1});
        const CodecConv& proj = weights_.out_proj[k];
        const at::Tensor part = at::linear(rows, proj.weight.squeeze(2), proj.bias);
        z = z.defined() ? z + part : part;
    }
    at::Tensor x = codec::transformer(z.transpose(1, 2), weights_.post, state.frames, state.keys,
                                      state.values);
    std::size_t carry = 0;
    auto next_carry = [&]() -> at::Tensor& {
        if (state.carry.size() <= carry) state.carry.resize(carry + 1);
        return state.carry[carry++];
    };
    // From here on in the compute dtype (the first window converts the transformer's output).
    for (std::size_t i = 0; i < weights_.upsample.size(); ++i) {
        x = codec::causal_transposed(x, at::Tensor(), weights_.upsample[i], 2, next_carry());
        x = codec::convnext(x, weights_.upsample_convnext[i], next_carry());
    }
    x = codec::causal_conv(x, weights_.first, next_carry());
    for (const CodecDecoderStage& stage : weights_.stages) {
        x = codec::causal_transposed(x, stage.alpha, stage.transposed, stage.stride, next_carry());
        for (const CodecResidualUnit& unit : stage.units) {
            x = codec::residual_unit(x, unit, next_carry());
        }
    }
    x = codec::snake_conv(x, weights_.final_alpha, weights_.last, next_carry());
    state.frames += frames;
    return x.tanh_().squeeze(1).to(at::kCPU, at::kFloat);
}

}  // namespace omnirt::models::s2_pro

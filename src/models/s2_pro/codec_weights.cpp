#include "models/s2_pro/codec_weights.h"

namespace omnirt::models::s2_pro {
namespace {

using Expected = std::vector<checkpoint::ExpectedTensor>;

void add(Expected& out, std::string name, Shape shape) {
    out.push_back({.name = std::move(name), .shape = std::move(shape), .optional = false});
}

// A weight-normed Conv1d (new-style parametrization keys).
void conv(Expected& out, const std::string& prefix, std::int64_t out_channels,
          std::int64_t in_channels, std::int64_t kernel) {
    add(out, prefix + ".conv.parametrizations.weight.original0", {out_channels, 1, 1});
    add(out, prefix + ".conv.parametrizations.weight.original1",
        {out_channels, in_channels, kernel});
    add(out, prefix + ".conv.bias", {out_channels});
}

// A weight-normed ConvTranspose1d: [in, out, k], g per input channel.
void transposed(Expected& out, const std::string& prefix, std::int64_t in_channels,
                std::int64_t out_channels, std::int64_t kernel) {
    add(out, prefix + ".conv.parametrizations.weight.original0", {in_channels, 1, 1});
    add(out, prefix + ".conv.parametrizations.weight.original1",
        {in_channels, out_channels, kernel});
    add(out, prefix + ".conv.bias", {out_channels});
}

void snake(Expected& out, const std::string& name, std::int64_t channels) {
    add(out, name, {1, channels, 1});
}

void residual_unit(Expected& out, const std::string& prefix, std::int64_t channels) {
    snake(out, prefix + ".block.0.alpha", channels);
    conv(out, prefix + ".block.1", channels, channels, 7);
    snake(out, prefix + ".block.2.alpha", channels);
    conv(out, prefix + ".block.3", channels, channels, 1);
}

void transformer(Expected& out, const std::string& prefix, std::int64_t layers, std::int64_t dim,
                 std::int64_t intermediate) {
    for (std::int64_t l = 0; l < layers; ++l) {
        const std::string layer = prefix + ".layers." + std::to_string(l) + ".";
        add(out, layer + "attention.wqkv.weight", {3 * dim, dim});
        add(out, layer + "attention.wo.weight", {dim, dim});
        add(out, layer + "feed_forward.w1.weight", {intermediate, dim});
        add(out, layer + "feed_forward.w3.weight", {intermediate, dim});
        add(out, layer + "feed_forward.w2.weight", {dim, intermediate});
        add(out, layer + "ffn_norm.weight", {dim});
        add(out, layer + "attention_norm.weight", {dim});
        add(out, layer + "attention_layer_scale.gamma", {dim});
        add(out, layer + "ffn_layer_scale.gamma", {dim});
    }
    add(out, prefix + ".norm.weight", {dim});
}

void convnext(Expected& out, const std::string& prefix, std::int64_t dim,
              std::int64_t intermediate) {
    add(out, prefix + ".dwconv.conv.weight", {dim, 1, 7});
    add(out, prefix + ".dwconv.conv.bias", {dim});
    add(out, prefix + ".norm.weight", {dim});
    add(out, prefix + ".norm.bias", {dim});
    add(out, prefix + ".pwconv1.weight", {intermediate, dim});
    add(out, prefix + ".pwconv1.bias", {intermediate});
    add(out, prefix + ".pwconv2.weight", {dim, intermediate});
    add(out, prefix + ".pwconv2.bias", {dim});
    add(out, prefix + ".gamma", {dim});
}

void quantizer(Expected& out, const std::string& prefix, std::int64_t entries,
               std::int64_t codebook_dim, std::int64_t latent) {
    add(out, prefix + ".codebook.weight", {entries, codebook_dim});
    add(out, prefix + ".in_proj.weight_v", {codebook_dim, latent, 1});
    add(out, prefix + ".in_proj.weight_g", {codebook_dim, 1, 1});
    add(out, prefix + ".in_proj.bias", {codebook_dim});
    add(out, prefix + ".out_proj.weight_v", {latent, codebook_dim, 1});
    add(out, prefix + ".out_proj.weight_g", {latent, 1, 1});
    add(out, prefix + ".out_proj.bias", {latent});
}

Result<std::int64_t> dim_of(const ShapeOf& shape_of, const std::string& name, std::size_t rank,
                            std::size_t axis) {
    const Shape shape = shape_of(name);
    if (shape.empty()) {
        return fail(ErrorCode::invalid_argument, "codec: tensor '" + name + "' is missing");
    }
    if (shape.size() != rank || shape[axis] <= 0) {
        return fail(ErrorCode::invalid_argument,
                    "codec: tensor '" + name + "' has shape " + checkpoint::shape_to_string(shape));
    }
    return shape[axis];
}

std::int64_t count(const ShapeOf& shape_of, const std::string& before, const std::string& after) {
    std::int64_t n = 0;
    while (n < 1024 && !shape_of(before + std::to_string(n) + after).empty()) ++n;
    return n;
}

}  // namespace

std::int64_t CodecSizes::hop() const {
    std::int64_t hop = std::int64_t{1} << resample_stages;
    for (std::int64_t rate : decoder_rates) hop *= rate;
    return hop;
}

Result<CodecSizes> codec_preset(std::string_view name) {
    CodecSizes sizes;
    if (name == "release") return sizes;
    if (name == "tiny" || name == "small") {
        const bool tiny = name == "tiny";
        sizes.latent = tiny ? 64 : 256;
        sizes.transformer_layers = 2;
        sizes.transformer_intermediate = 3 * sizes.latent;
        sizes.convnext_intermediate = 4 * sizes.latent;
        sizes.decoder_dim = tiny ? 64 : 384;
        sizes.encoder_dim = sizes.latent / 16;
        sizes.encoder_transformer_layers = 1;
        return sizes;
    }
    return fail(ErrorCode::not_found,
                "unknown codec preset '" + std::string(name) + "'; known: release, tiny, small");
}

std::vector<checkpoint::ExpectedTensor> codec_expected_tensors(const CodecSizes& s) {
    Expected out;
    const std::int64_t latent = s.latent;
    quantizer(out, "quantizer.semantic_quantizer.quantizers.0", s.semantic_codebook_size,
              s.codebook_dim, latent);
    for (std::int64_t i = 0; i < s.residual_codebooks; ++i) {
        quantizer(out, "quantizer.quantizer.quantizers." + std::to_string(i), s.codebook_size,
                  s.codebook_dim, latent);
    }
    for (const char* module : {"quantizer.pre_module", "quantizer.post_module"}) {
        transformer(out, module, s.transformer_layers, latent, s.transformer_intermediate);
    }
    for (const char* resample : {"quantizer.downsample.", "quantizer.upsample."}) {
        for (std::int64_t i = 0; i < s.resample_stages; ++i) {
            const std::string stage = resample + std::to_string(i);
            add(out, stage + ".0.conv.weight", {latent, latent, 2});
            add(out, stage + ".0.conv.bias", {latent});
            convnext(out, stage + ".1", latent, s.convnext_intermediate);
        }
    }
    conv(out, "decoder.model.0", s.decoder_dim, latent, 7);
    std::int64_t channels = s.decoder_dim;
    for (std::size_t i = 0; i < s.decoder_rates.size(); ++i) {
        const std::string block = "decoder.model." + std::to_string(i + 1) + ".block.";
        const std::int64_t next = channels / 2;
        snake(out, block + "0.alpha", channels);
        transposed(out, block + "1", channels, next, 2 * s.decoder_rates[i]);
        for (int unit = 2; unit <= 4; ++unit) {
            residual_unit(out, block + std::to_string(unit), next);
        }
        channels = next;
    }
    const std::string last = "decoder.model." + std::to_string(s.decoder_rates.size() + 1);
    snake(out, last + ".alpha", channels);
    conv(out, "decoder.model." + std::to_string(s.decoder_rates.size() + 2), 1, channels, 7);

    if (s.encoder_dim > 0) {
        conv(out, "encoder.block.0", s.encoder_dim, 1, 7);
        std::int64_t dim = s.encoder_dim;
        for (std::size_t i = 0; i < s.encoder_rates.size(); ++i) {
            const std::string block = "encoder.block." + std::to_string(i + 1) + ".block.";
            for (int unit = 0; unit < 3; ++unit)
                residual_unit(out, block + std::to_string(unit), dim);
            snake(out, block + "3.alpha", dim);
            conv(out, block + "4", 2 * dim, dim, 2 * s.encoder_rates[i]);
            dim *= 2;
            if (i + 1 == s.encoder_rates.size() && s.encoder_transformer_layers > 0) {
                transformer(out, block + "5", s.encoder_transformer_layers, dim, 3 * dim);
            }
        }
        const std::string tail = "encoder.block." + std::to_string(s.encoder_rates.size() + 1);
        snake(out, tail + ".alpha", dim);
        conv(out, "encoder.block." + std::to_string(s.encoder_rates.size() + 2), latent, dim, 3);
    }
    return out;
}

std::vector<checkpoint::TensorSpec> codec_tensor_specs(const CodecSizes& sizes, DType dtype) {
    std::vector<checkpoint::TensorSpec> specs;
    for (checkpoint::ExpectedTensor& tensor : codec_expected_tensors(sizes)) {
        const std::string& name = tensor.name;
        const bool around_one = name.ends_with("norm.weight") || name.ends_with(".gamma") ||
                                name.ends_with(".alpha") || name.ends_with("original0") ||
                                name.ends_with("weight_g");
        specs.push_back({.name = std::move(tensor.name),
                         .shape = std::move(tensor.shape),
                         .dtype = dtype,
                         .mean = around_one ? 1.0 : 0.0});
    }
    return specs;
}

Result<CodecSizes> infer_codec_sizes(const ShapeOf& shape_of) {
    CodecSizes s;
    OMNI_TRY(s.latent, dim_of(shape_of, "quantizer.post_module.norm.weight", 1, 0));
    s.transformer_layers =
        count(shape_of, "quantizer.post_module.layers.", ".attention.wqkv.weight");
    if (s.transformer_layers == 0 || s.latent % kCodecHeadDim != 0) {
        return fail(ErrorCode::invalid_argument,
                    "codec: quantizer.post_module needs layers and a width divisible by 64");
    }
    OMNI_TRY(s.transformer_intermediate,
             dim_of(shape_of, "quantizer.post_module.layers.0.feed_forward.w1.weight", 2, 0));
    s.resample_stages = count(shape_of, "quantizer.upsample.", ".0.conv.weight");
    if (s.resample_stages > 0) {
        OMNI_TRY(s.convnext_intermediate,
                 dim_of(shape_of, "quantizer.upsample.0.1.pwconv1.weight", 2, 0));
    }
    OMNI_TRY(s.semantic_codebook_size,
             dim_of(shape_of, "quantizer.semantic_quantizer.quantizers.0.codebook.weight", 2, 0));
    OMNI_TRY(s.codebook_dim,
             dim_of(shape_of, "quantizer.semantic_quantizer.quantizers.0.codebook.weight", 2, 1));
    s.residual_codebooks = count(shape_of, "quantizer.quantizer.quantizers.", ".codebook.weight");
    if (s.residual_codebooks > 0) {
        OMNI_TRY(s.codebook_size,
                 dim_of(shape_of, "quantizer.quantizer.quantizers.0.codebook.weight", 2, 0));
    }
    const std::string weight = ".conv.parametrizations.weight.original1";
    OMNI_TRY(s.decoder_dim, dim_of(shape_of, "decoder.model.0" + weight, 3, 0));
    s.decoder_rates.clear();
    for (std::int64_t i = 1; i < 64; ++i) {
        const std::string name = "decoder.model." + std::to_string(i) + ".block.1" + weight;
        if (shape_of(name).empty()) break;
        OMNI_TRY(std::int64_t kernel, dim_of(shape_of, name, 3, 2));
        if (kernel % 2 != 0) {
            return fail(ErrorCode::invalid_argument,
                        "codec: '" + name + "' has an odd kernel (2 x stride expected)");
        }
        s.decoder_rates.push_back(kernel / 2);
    }
    if (s.decoder_rates.empty()) {
        return fail(ErrorCode::invalid_argument, "codec: the decoder has no upsampling stage");
    }
    s.encoder_rates.clear();
    s.encoder_dim = 0;
    s.encoder_transformer_layers = 0;
    if (!shape_of("encoder.block.0" + weight).empty()) {
        OMNI_TRY(s.encoder_dim, dim_of(shape_of, "encoder.block.0" + weight, 3, 0));
        for (std::int64_t i = 1; i < 64; ++i) {
            const std::string name = "encoder.block." + std::to_string(i) + ".block.4" + weight;
            if (shape_of(name).empty()) break;
            OMNI_TRY(std::int64_t kernel, dim_of(shape_of, name, 3, 2));
            s.encoder_rates.push_back(kernel / 2);
        }
        s.encoder_transformer_layers =
            count(shape_of,
                  "encoder.block." + std::to_string(s.encoder_rates.size()) + ".block.5.layers.",
                  ".attention.wqkv.weight");
    }
    return s;
}

}  // namespace omnirt::models::s2_pro

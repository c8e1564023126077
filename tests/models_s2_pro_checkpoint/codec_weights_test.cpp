// The codec's tensor list (fact sheet section 7.5): the release's 535 tensors and 391,430,530
// parameters (as voicehub's re-implementation counts them), sizes read back off the shapes, and
// the generated checkpoints' codec.safetensors.
#include "models/s2_pro/codec_weights.h"

#include <gtest/gtest.h>

#include <map>

#include "checkpoint/safetensors.h"
#include "checkpoint/test_support.h"
#include "models/s2_pro/make_checkpoint.h"

namespace omnirt::models::s2_pro {
namespace {

std::map<std::string, Shape> shapes_of(const CodecSizes& sizes) {
    std::map<std::string, Shape> shapes;
    for (const auto& tensor : codec_expected_tensors(sizes)) shapes[tensor.name] = tensor.shape;
    return shapes;
}

TEST(S2ProCodecWeightsTest, ReleaseHas535TensorsAnd391430530Parameters) {
    const CodecSizes sizes = *codec_preset("release");
    EXPECT_EQ(sizes.hop(), 2048);
    EXPECT_EQ(sizes.num_codebooks(), 10);
    const auto tensors = codec_expected_tensors(sizes);
    EXPECT_EQ(tensors.size(), 535u);
    std::int64_t parameters = 0;
    for (const auto& tensor : tensors) {
        std::int64_t count = 1;
        for (std::int64_t extent : tensor.shape) count *= extent;
        parameters += count;
    }
    EXPECT_EQ(parameters, 391430530);
    auto shapes = shapes_of(sizes);
    EXPECT_EQ(shapes["quantizer.semantic_quantizer.quantizers.0.codebook.weight"],
              (Shape{4096, 8}));
    EXPECT_EQ(shapes["quantizer.quantizer.quantizers.8.out_proj.weight_v"], (Shape{1024, 8, 1}));
    EXPECT_EQ(shapes["quantizer.post_module.layers.7.attention.wqkv.weight"], (Shape{3072, 1024}));
    EXPECT_EQ(shapes["quantizer.upsample.1.1.pwconv1.weight"], (Shape{4096, 1024}));
    EXPECT_EQ(shapes["decoder.model.0.conv.parametrizations.weight.original1"],
              (Shape{1536, 1024, 7}));
    EXPECT_EQ(shapes["decoder.model.1.block.1.conv.parametrizations.weight.original1"],
              (Shape{1536, 768, 16}));
    EXPECT_EQ(shapes["decoder.model.4.block.1.conv.parametrizations.weight.original1"],
              (Shape{192, 96, 4}));
    EXPECT_EQ(shapes["decoder.model.6.conv.parametrizations.weight.original1"], (Shape{1, 96, 7}));
    EXPECT_EQ(shapes["encoder.block.4.block.4.conv.parametrizations.weight.original1"],
              (Shape{1024, 512, 16}));
    EXPECT_EQ(shapes["encoder.block.4.block.5.norm.weight"], (Shape{1024}));
    EXPECT_EQ(shapes["encoder.block.6.conv.parametrizations.weight.original1"],
              (Shape{1024, 1024, 3}));
}

TEST(S2ProCodecWeightsTest, SizesAreReadBackOffTheShapes) {
    for (const char* name : {"release", "tiny", "small"}) {
        const CodecSizes sizes = *codec_preset(name);
        const auto shapes = shapes_of(sizes);
        auto inferred = infer_codec_sizes([&](const std::string& tensor) {
            auto it = shapes.find(tensor);
            return it == shapes.end() ? Shape{} : it->second;
        });
        ASSERT_TRUE(inferred.has_value()) << name << ": " << inferred.error().to_string();
        EXPECT_EQ(inferred->latent, sizes.latent) << name;
        EXPECT_EQ(inferred->transformer_layers, sizes.transformer_layers) << name;
        EXPECT_EQ(inferred->transformer_intermediate, sizes.transformer_intermediate) << name;
        EXPECT_EQ(inferred->convnext_intermediate, sizes.convnext_intermediate) << name;
        EXPECT_EQ(inferred->resample_stages, sizes.resample_stages) << name;
        EXPECT_EQ(inferred->residual_codebooks, 9) << name;
        EXPECT_EQ(inferred->decoder_dim, sizes.decoder_dim) << name;
        EXPECT_EQ(inferred->decoder_rates, sizes.decoder_rates) << name;
        EXPECT_EQ(inferred->encoder_dim, sizes.encoder_dim) << name;
        EXPECT_EQ(inferred->encoder_rates, sizes.encoder_rates) << name;
        EXPECT_EQ(inferred->encoder_transformer_layers, sizes.encoder_transformer_layers) << name;
        EXPECT_EQ(inferred->hop(), 2048) << name;
    }
    auto empty = infer_codec_sizes([](const std::string&) { return Shape{}; });
    ASSERT_FALSE(empty.has_value());
    EXPECT_NE(empty.error().message.find("quantizer.post_module.norm.weight"), std::string::npos);
    EXPECT_FALSE(codec_preset("huge").has_value());
}

TEST(S2ProCodecWeightsTest, GeneratedCheckpointHasItsCodec) {
    checkpoint::testing::TempDir dir;
    ASSERT_TRUE(make_checkpoint(dir.path(), {.preset = "tiny"}).has_value());
    auto codec = checkpoint::SafetensorsFile::open(dir / std::string(kCodecFile));
    ASSERT_TRUE(codec.has_value()) << codec.error().to_string();
    const auto expected = codec_expected_tensors(*codec_preset("tiny"));
    EXPECT_EQ((*codec)->entries().size(), expected.size());
    for (const auto& tensor : expected) {
        const checkpoint::TensorEntry* entry = (*codec)->find(tensor.name);
        ASSERT_NE(entry, nullptr) << tensor.name;
        EXPECT_EQ(entry->shape, tensor.shape) << tensor.name;
        EXPECT_EQ(entry->dtype, DType::f32) << tensor.name;
    }
}

}  // namespace
}  // namespace omnirt::models::s2_pro

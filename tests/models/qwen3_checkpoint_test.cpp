// Qwen3Model from a generated Hugging Face checkpoint directory (real names, safetensors, mmap):
// loads through Checkpoint::tensor, shares the mapping where the dtype already fits, and computes
// what the dense reference computes from the same tensors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/test_support.h"
#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3_test_support.h"

namespace omnirt::models::qwen3 {
namespace {

using checkpoint::Checkpoint;

struct Loaded {
    std::unique_ptr<Checkpoint> checkpoint;
    Qwen3Config config;
};

Loaded generate(const std::filesystem::path& directory, bool moe) {
    auto made = make_checkpoint(
        directory,
        {.preset = "tiny", .moe = moe, .seed = 3, .dtype = DType::bf16, .init_std = 0.15});
    OMNI_CHECK(made.has_value(), made.has_value() ? "" : made.error().to_string());
    auto opened = Checkpoint::open(directory);
    OMNI_CHECK(opened.has_value(), "open");
    auto config = load_config(**opened);
    OMNI_CHECK(config.has_value(), "config");
    return {std::move(*opened), *config};
}

WeightLookup lookup_of(const Checkpoint& checkpoint) {
    return [&checkpoint](const std::string& name) { return checkpoint.tensor(name); };
}

class Qwen3CheckpointTest : public ::testing::TestWithParam<bool> {};  // param: MoE

TEST_P(Qwen3CheckpointTest, Bfloat16WeightsShareTheMappingAndRun) {
    checkpoint::testing::TempDir directory;
    const Loaded loaded = generate(directory.path(), GetParam());
    auto model =
        Qwen3Model::create(loaded.config, lookup_of(*loaded.checkpoint), {.dtype = at::kBFloat16});
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    // Unfused tensors of the checkpoint's dtype are views of the mapped file.
    const std::string name = "model.layers.1.self_attn.o_proj.weight";
    auto mapped = loaded.checkpoint->tensor(name);
    ASSERT_TRUE(mapped.has_value());
    EXPECT_EQ((*model)->weights().layers[1].o_proj.data_ptr(),
              static_cast<const void*>(mapped->data()));
    EXPECT_EQ((*model)->weights().norm.data_ptr(),
              static_cast<const void*>(loaded.checkpoint->tensor("model.norm.weight")->data()));

    auto cache = testing::make_cache(**model, 8, 4);
    const auto tokens = testing::token_ids(9, loaded.config.vocab_size, 1);
    auto output = (*model)->forward(
        std::vector{testing::sequence_input("a", tokens, 0, testing::block_range(0, 3))}, *cache);
    ASSERT_TRUE(output.has_value()) << output.error().to_string();
    EXPECT_TRUE(at::isfinite(output->logits).all().item<bool>());
}

TEST_P(Qwen3CheckpointTest, Float32ModelMatchesTheReferenceOnTheCheckpointTensors) {
    checkpoint::testing::TempDir directory;
    const Loaded loaded = generate(directory.path(), GetParam());
    testing::WeightMap weights;
    for (const std::string& name : loaded.checkpoint->tensor_names()) {
        auto tensor = loaded.checkpoint->tensor(name);
        ASSERT_TRUE(tensor.has_value());
        weights[name] = torch_bridge::to_torch(*tensor).to(at::kFloat);
    }
    auto model = Qwen3Model::create(loaded.config, lookup_of(*loaded.checkpoint));
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    auto cache = testing::make_cache(**model, 8, 4);
    const auto tokens = testing::token_ids(11, loaded.config.vocab_size, 2);
    auto output = (*model)->forward(
        std::vector{testing::sequence_input("a", tokens, 0, testing::block_range(0, 3))}, *cache);
    ASSERT_TRUE(output.has_value()) << output.error().to_string();
    testing::expect_close(output->logits[0],
                          testing::reference_forward(loaded.config, weights, tokens)[10], 1e-4);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, Qwen3CheckpointTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Moe" : "Dense"; });

}  // namespace
}  // namespace omnirt::models::qwen3

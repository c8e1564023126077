// Qwen3 and Qwen3-MoE against Hugging Face transformers: tests/goldens/hf/qwen3_tiny*.safetensors
// hold transformers' float32 logits for every prompt position and its greedy continuation, for
// the checkpoints `omnirt make-checkpoint --arch qwen3|qwen3_moe --preset tiny --seed 7
// --init-std 0.1` writes (scripts/goldens/hf_goldens.py on the GPU machine, docs/gpu.md). The
// test regenerates the same checkpoint, feeds the prompt one position at a time (the decode path)
// and checks each position's log-probabilities, then follows the greedy continuation.
// In float32 on the CPU, and in bfloat16 (weights and activations; a looser bound, greedy tokens
// not required to match); the same on cuda:0 where libtorch has CUDA and a GPU is visible (the
// device run, docs/gpu.md), skipped elsewhere.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/test_support.h"
#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3_test_support.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3 {
namespace {

std::filesystem::path golden_file(const std::string& name) {
    return std::filesystem::path(OMNIRT_SOURCE_DIR) / "tests/goldens/hf" / (name + ".safetensors");
}

at::Tensor golden_tensor(const checkpoint::SafetensorsFile& file, const std::string& name) {
    auto tensor = file.tensor(name);
    OMNI_CHECK(tensor.has_value(), ("golden tensor " + name).c_str());
    return torch_bridge::to_torch(*tensor).clone();
}

struct GoldenCase {
    bool moe;
    bool cuda;
    at::ScalarType dtype;
};

std::string case_name(const GoldenCase& c) {
    return std::string(c.moe ? "Moe" : "Dense") + (c.cuda ? "Cuda" : "Cpu") +
           (c.dtype == at::kFloat ? "Float32" : "Bfloat16");
}

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << case_name(c); }

class Qwen3HfGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Qwen3HfGoldenTest, LogprobsAndGreedyTokensMatchTransformers) {
    const auto [moe, cuda, dtype] = GetParam();
    if (cuda && !at::hasCUDA()) GTEST_SKIP() << "libtorch has no CUDA or no GPU is visible";
    const at::Device device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    // float32: transformers' own bound. bfloat16 rounds every activation to 8 bits of mantissa.
    const bool exact = dtype == at::kFloat;
    const double tolerance = exact ? 1e-2 : 0.15;
    const auto path = golden_file(moe ? "qwen3_tiny_moe" : "qwen3_tiny");
    if (!std::filesystem::exists(path)) {
        GTEST_SKIP() << path
                     << " is not generated yet (scripts/goldens/hf_goldens.py, docs/gpu.md)";
    }
    auto golden = checkpoint::SafetensorsFile::open(path);
    ASSERT_TRUE(golden.has_value()) << golden.error().to_string();
    const at::Tensor prompt = golden_tensor(**golden, "prompt");
    const at::Tensor logits = golden_tensor(**golden, "logits");
    const at::Tensor greedy = golden_tensor(**golden, "greedy");

    checkpoint::testing::TempDir directory;
    auto made = make_checkpoint(
        directory.path(),
        {.preset = "tiny", .moe = moe, .seed = 7, .dtype = DType::bf16, .init_std = 0.1});
    ASSERT_TRUE(made.has_value()) << made.error().to_string();
    auto opened = checkpoint::Checkpoint::open(directory.path());
    ASSERT_TRUE(opened.has_value());
    const checkpoint::Checkpoint& ckpt = **opened;
    auto model = Qwen3Model::create(made->config,
                                    [&ckpt](const std::string& name) { return ckpt.tensor(name); },
                                    {.dtype = dtype, .device = device});
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    auto created = engine::KVCache::create((*model)->kv_spec(), 16, 4, device);
    ASSERT_TRUE(created.has_value()) << created.error().to_string();
    auto cache = std::move(*created);
    const auto blocks = testing::block_range(0, 16);

    std::int64_t position = 0;
    auto step = [&](std::int32_t token) {
        auto output = (*model)->forward(
            std::vector{testing::sequence_input("a", {token}, position, blocks)}, *cache);
        OMNI_CHECK(output.has_value(), "forward");
        ++position;
        return output->logits[0].to(at::kCPU).to(at::kFloat);
    };
    at::Tensor last;
    double worst = 0.0;
    for (std::int64_t i = 0; i < prompt.size(0); ++i) {
        last = step(static_cast<std::int32_t>(prompt[i].item<std::int64_t>()));
        const double diff =
            (at::log_softmax(last, -1) - at::log_softmax(logits[i], -1)).abs().max().item<double>();
        EXPECT_LT(diff, tolerance) << "position " << i;
        worst = std::max(worst, diff);
    }
    std::cout << "largest log-probability difference from transformers: " << worst << "\n";
    if (!exact) return;
    for (std::int64_t k = 0; k < greedy.size(0); ++k) {
        const std::int64_t expected = greedy[k].item<std::int64_t>();
        ASSERT_EQ(last.argmax().item<std::int64_t>(), expected) << "greedy token " << k;
        last = step(static_cast<std::int32_t>(expected));
    }
}

INSTANTIATE_TEST_SUITE_P(
    DenseAndMoe, Qwen3HfGoldenTest,
    ::testing::Values(GoldenCase{false, false, at::kFloat}, GoldenCase{true, false, at::kFloat},
                      GoldenCase{false, false, at::kBFloat16},
                      GoldenCase{true, false, at::kBFloat16}, GoldenCase{false, true, at::kFloat},
                      GoldenCase{true, true, at::kFloat}, GoldenCase{false, true, at::kBFloat16},
                      GoldenCase{true, true, at::kBFloat16}),
    [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace omnirt::models::qwen3

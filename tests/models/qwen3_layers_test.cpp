// The Qwen3 building blocks against transformers' formulas written with plain ATen operators:
// RMSNorm and RoPE kernels (float32, bfloat16, strided rows), rotary tables, the small-row
// linear path, and MoE routing against a naive dense loop over the experts.
#include "models/qwen3/layers.h"

#include "models/qwen3/qwen3_weights.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "models/qwen3_test_support.h"

namespace omnirt::models::qwen3 {
namespace {

using testing::expect_close;

at::Tensor formula_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    const at::Tensor x32 = x.to(at::kFloat);
    return weight * (x32 * at::rsqrt(x32.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
}

at::Tensor formula_rotary(const at::Tensor& x, const RotaryTables& tables) {
    const at::Tensor cos = tables.cos.to(x.scalar_type()).unsqueeze(1);
    const at::Tensor sin = tables.sin.to(x.scalar_type()).unsqueeze(1);
    return x * cos + testing::reference_rotate_half(x) * sin;
}

TEST(Qwen3Layers, RmsNormMatchesTheFormula) {
    at::manual_seed(1);
    for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
        const double tolerance = type == at::kFloat ? 1e-6 : 1e-2;
        // Widths of whole vectors, with a tail, and Qwen3-0.6B's hidden size.
        for (std::int64_t width : {48, 53, 1024}) {
            const at::Tensor weight = (1.0 + 0.1 * at::randn({width})).to(type);
            const at::Tensor x = (3.0 * at::randn({5, width})).to(type);
            expect_close(rms_norm(x, weight, 1e-6), formula_rms_norm(x, weight, 1e-6), tolerance);
        }
        // Rows of a fused projection: a strided [tokens, heads, dim] view.
        const at::Tensor fused = (2.0 * at::randn({5, 7 * 16})).to(type);
        const at::Tensor heads = fused.narrow(1, 32, 3 * 16).view({5, 3, 16});
        const at::Tensor head_weight = (1.0 + 0.1 * at::randn({16})).to(type);
        const at::Tensor normed = rms_norm(heads, head_weight, 1e-6);
        EXPECT_TRUE(normed.is_contiguous());
        expect_close(normed, formula_rms_norm(heads, head_weight, 1e-6), tolerance);
    }
}

TEST(Qwen3Layers, RotaryMatchesTheFormula) {
    DefaultRotaryEmbedding rotary(16, 1e6, 4096);
    const std::vector<engine::SequenceInput> batch = {
        testing::sequence_input("a", {1, 2, 3}, 0, {0}),
        testing::sequence_input("b", {4}, 3000, {0}),
        testing::sequence_input("c", {5, 6}, 17, {0}),
    };
    auto tables = rotary.tables(batch, 6);
    ASSERT_TRUE(tables.has_value());
    ASSERT_EQ(tables->cos.sizes(), (at::IntArrayRef{6, 16}));
    // Row 3 is position 3000: cos(3000 * inv_freq) in both halves.
    const at::Tensor inv_freq =
        1.0 / at::pow(1e6, at::arange(0, 16, 2, at::kLong).to(at::kFloat) / 16);
    const at::Tensor angles = at::full({1}, 3000.0f) * inv_freq;
    expect_close(tables->cos[3], at::cat({angles.cos(), angles.cos()}), 1e-6);
    expect_close(tables->sin[3], at::cat({angles.sin(), angles.sin()}), 1e-6);
    at::manual_seed(2);
    for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
        const at::Tensor x = at::randn({6, 3, 16}).to(type);
        at::Tensor rotated = x.clone();
        apply_rotary(rotated, *tables);
        expect_close(rotated, formula_rotary(x, *tables), type == at::kFloat ? 1e-6 : 1e-2);
    }
    // Head sizes with a tail of the vector loop (20) and Qwen3's (128).
    for (std::int64_t dim : {20, 128}) {
        DefaultRotaryEmbedding wide(dim, 1e6, 4096);
        auto wide_tables = wide.tables(batch, 6);
        ASSERT_TRUE(wide_tables.has_value());
        for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
            const at::Tensor x = at::randn({6, 3, dim}).to(type);
            at::Tensor rotated = x.clone();
            apply_rotary(rotated, *wide_tables);
            expect_close(rotated, formula_rotary(x, *wide_tables),
                         type == at::kFloat ? 1e-6 : 1e-2);
        }
    }
    const std::vector<engine::SequenceInput> beyond = {
        testing::sequence_input("x", {1}, 4096, {0})};
    EXPECT_FALSE(rotary.tables(beyond, 1).has_value());
}

TEST(Qwen3Layers, ProjectMatchesLinearForEveryRowCount) {
    at::manual_seed(3);
    for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
        // 40 inputs: the vectorized GEMV's 16-wide steps and its scalar tail.
        const at::Tensor weight = at::randn({96, 40}).to(type);
        const at::Tensor bias = at::randn({96}).to(type);
        const double tolerance = type == at::kFloat ? 1e-6 : 1e-2;
        for (std::int64_t rows : {1, 2, 4, 5, 17}) {
            const at::Tensor x = at::randn({rows, 40}).to(type);
            const at::Tensor plain = project(x, weight);
            EXPECT_EQ(plain.scalar_type(), type);
            // Against float32 math on the same (rounded) values.
            expect_close(plain, at::linear(x.to(at::kFloat), weight.to(at::kFloat)), tolerance);
            expect_close(project(x, weight, bias),
                         at::linear(x.to(at::kFloat), weight.to(at::kFloat), bias.to(at::kFloat)),
                         tolerance);
        }
    }
}

// The loader packs the dense bfloat16 matrices for the decode kernels (where the CPU runs them),
// float32 ones only when their values are bfloat16s; project() and swiglu_mlp() over the packed
// copies give the same bits.
TEST(Qwen3Layers, PackedDecodeWeightsGiveTheSameBits) {
    const Qwen3Config config = testing::tiny_config();
    const testing::WeightMap source = testing::random_weights(config, 21);
    auto float32 = load_qwen3_weights(config, testing::lookup_of(source), {.dtype = at::kFloat});
    ASSERT_TRUE(float32.has_value()) << float32.error().to_string();
    EXPECT_FALSE(float32->lm_head_packed);
    EXPECT_FALSE(float32->layers[0].qkv_packed);
    if (!engine::cpu::PackedWeight::pack(at::zeros({1, 32}, at::kBFloat16))) {
        GTEST_SKIP() << "no packing here (OMNIRT_CPU_PACK=0, or no AVX512-BF16 / VL)";
    }
    auto loaded = load_qwen3_weights(config, testing::lookup_of(source), {.dtype = at::kBFloat16});
    ASSERT_TRUE(loaded.has_value()) << loaded.error().to_string();
    ASSERT_TRUE(loaded->lm_head_packed);
    EXPECT_TRUE(loaded->lm_head_packed->unpack().equal(loaded->lm_head));
    for (const Qwen3LayerWeights& layer : loaded->layers) {
        ASSERT_TRUE(layer.qkv_packed && layer.o_packed && layer.gate_up_packed &&
                    layer.down_packed);
        EXPECT_TRUE(layer.qkv_packed->unpack().equal(layer.qkv_proj));
        EXPECT_TRUE(layer.down_packed->unpack().equal(layer.down_proj));
    }
    // float32 weights of bfloat16 values (a bfloat16 checkpoint served in float32).
    testing::WeightMap rounded = source;
    for (auto& [name, value] : rounded) value = value.to(at::kBFloat16).to(at::kFloat);
    auto widened = load_qwen3_weights(config, testing::lookup_of(rounded), {.dtype = at::kFloat});
    ASSERT_TRUE(widened.has_value()) << widened.error().to_string();
    ASSERT_TRUE(widened->lm_head_packed);
    EXPECT_EQ(widened->lm_head_packed->dtype(), at::kFloat);
    const Qwen3LayerWeights& wide = widened->layers[0];
    ASSERT_TRUE(wide.qkv_packed);
    const Qwen3LayerWeights& layer = loaded->layers[0];
    at::manual_seed(22);
    for (std::int64_t rows : {1, 2, 3, 4}) {
        const at::Tensor x = at::randn({rows, config.hidden_size}).to(at::kBFloat16);
        EXPECT_TRUE(project(x, layer.qkv_proj, {}, layer.qkv_packed.get())
                        .equal(project(x, layer.qkv_proj)))
            << rows;
        const at::Tensor x32 = x.to(at::kFloat);
        // One float32 row of a packed weight takes the streaming order, an unpacked one BLAS'
        // mv: the same values to float32 rounding, the same bits from two rows on.
        const at::Tensor packed32 = project(x32, wide.qkv_proj, {}, wide.qkv_packed.get());
        if (rows == 1) {
            expect_close(packed32, project(x32, wide.qkv_proj), 1e-5);
        } else {
            EXPECT_TRUE(packed32.equal(project(x32, wide.qkv_proj))) << rows;
        }
        EXPECT_TRUE(swiglu_mlp(x, layer.gate_up_proj, layer.down_proj, layer.gate_up_packed.get(),
                               layer.down_packed.get())
                        .equal(swiglu_mlp(x, layer.gate_up_proj, layer.down_proj)))
            << rows;
    }
}

class MoeRouting : public ::testing::TestWithParam<bool> {};  // param: norm_topk_prob

TEST_P(MoeRouting, MatchesANaiveDenseLoopOverExperts) {
    Qwen3Config config = testing::tiny_config(/*moe=*/true);
    config.num_experts = 6;
    config.num_experts_per_tok = 3;
    config.norm_topk_prob = GetParam();
    const auto weights = testing::random_weights(config, 5);
    const std::string prefix = "model.layers.0.";
    std::vector<at::Tensor> gate_up;
    std::vector<at::Tensor> down;
    for (int e = 0; e < config.num_experts; ++e) {
        const std::string expert = prefix + "mlp.experts." + std::to_string(e) + ".";
        gate_up.push_back(at::cat(
            {weights.at(expert + "gate_proj.weight"), weights.at(expert + "up_proj.weight")}));
        down.push_back(weights.at(expert + "down_proj.weight"));
    }
    const at::Tensor& router = weights.at(prefix + "mlp.gate.weight");
    at::manual_seed(6);
    for (std::int64_t tokens : {1, 2, 9}) {
        const at::Tensor x = at::randn({tokens, config.hidden_size});
        const ExpertRouting routing =
            route_tokens(x, router, config.num_experts_per_tok, config.norm_topk_prob);
        ASSERT_EQ(routing.experts.sizes(), (at::IntArrayRef{tokens, 3}));
        // The chosen experts are the most probable ones, largest first.
        const at::Tensor probabilities = at::softmax(at::matmul(x, router.t()), -1);
        const at::Tensor sorted = std::get<0>(probabilities.sort(-1, /*descending=*/true));
        const at::Tensor chosen = probabilities.gather(1, routing.experts);
        expect_close(chosen, sorted.narrow(1, 0, 3), 1e-6);
        const at::Tensor expected_weights = GetParam() ? chosen / chosen.sum(-1, true) : chosen;
        expect_close(routing.weights, expected_weights, 1e-6);
        expect_close(moe_mlp(x, router, gate_up, down, 3, config.norm_topk_prob),
                     testing::reference_moe(config, weights, prefix, x), 1e-5,
                     std::to_string(tokens) + " tokens");
    }
}

INSTANTIATE_TEST_SUITE_P(NormTopK, MoeRouting, ::testing::Values(true, false));

}  // namespace
}  // namespace omnirt::models::qwen3

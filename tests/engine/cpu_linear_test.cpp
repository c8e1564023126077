// engine::cpu::small_batch_linear: the register-tiled kernels against a float64 matmul, for every
// row count up to the limit, ragged weight and input widths, strided input rows and biases; what
// it declines.
#include "engine/cpu_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

namespace omnirt::engine::cpu {
namespace {

at::Tensor reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    at::Tensor out = at::matmul(x.to(at::kDouble), weight.to(at::kDouble).t());
    if (bias.defined()) out += bias.to(at::kDouble);
    return out;
}

class SmallBatchLinear : public ::testing::TestWithParam<at::ScalarType> {
  protected:
    void SetUp() override {
        if (!small_batch_linear_supported(GetParam())) {
            GTEST_SKIP() << "this CPU lacks the instructions of the " << c10::toString(GetParam())
                         << " kernel (AVX512-BF16 / AVX-512F)";
        }
    }
};

TEST_P(SmallBatchLinear, MatchesAMatmulForEveryRowCount) {
    const at::ScalarType type = GetParam();
    // float32 sums of exact products: float32 agrees to rounding; bfloat16 output rounds.
    const double tolerance = type == at::kFloat ? 1e-5 : 1e-2;
    at::manual_seed(3);
    for (std::int64_t in : {64, 100, 1027}) {
        for (std::int64_t out : {1, 7, 70}) {
            const at::Tensor weight = (at::randn({out, in}) * 0.1).to(type);
            const at::Tensor bias = at::randn({out}).to(type);
            for (std::int64_t rows = 1; rows <= kSmallBatchMaxRows; rows += rows < 10 ? 1 : 9) {
                const at::Tensor x = at::randn({rows, in}).to(type);
                const at::Tensor y = small_batch_linear(x, weight);
                ASSERT_TRUE(y.defined());
                EXPECT_EQ(y.scalar_type(), type);
                EXPECT_EQ(y.sizes(), (at::IntArrayRef{rows, out}));
                EXPECT_TRUE(
                    at::allclose(y.to(at::kDouble), reference(x, weight, {}), tolerance, tolerance))
                    << "rows " << rows << " in " << in << " out " << out;
                const at::Tensor with_bias = small_batch_linear(x, weight, bias);
                EXPECT_TRUE(at::allclose(with_bias.to(at::kDouble), reference(x, weight, bias),
                                         tolerance, tolerance));
            }
        }
    }
}

// A row's outputs do not depend on the rows around it (full 4 x 4 tiles reduce their sums
// together, smaller ones one by one, in the same order), so one row alone gives the bits it gets
// in a batch: greedy decoding is the same at every batch size.
// One to four rows stream the weights; more go through the tiles (the
// ragged shapes here keep bfloat16 off the AMX kernel, cpu_linear_amx_test). Either way a row
// gives the bits it has inside a batch of 32 (ragged widths: tails and a partial row group).
TEST_P(SmallBatchLinear, FewRowsMatchTheirRowsInABatch) {
    const at::ScalarType type = GetParam();
    at::manual_seed(4);
    const at::Tensor weight = (at::randn({70, 1027}) * 0.1).to(type);
    const at::Tensor x = at::randn({32, 1027}).to(type);
    const at::Tensor batch = small_batch_linear(x, weight);
    ASSERT_TRUE(batch.defined());
    for (std::int64_t rows = 1; rows <= 10; ++rows) {
        for (const std::int64_t first : {std::int64_t{0}, std::int64_t{5}, 32 - rows}) {
            const at::Tensor few = small_batch_linear(x.narrow(0, first, rows), weight);
            ASSERT_TRUE(few.defined());
            EXPECT_TRUE(few.equal(batch.narrow(0, first, rows))) << rows << " rows at " << first;
        }
    }
}

// The streaming paths (up to four rows) give the tiles' bits, row
// groups full and partial, k tails included.
TEST_P(SmallBatchLinear, StreamingGivesTheTilesBits) {
    const at::ScalarType type = GetParam();
    at::manual_seed(9);
    const at::Tensor weight = (at::randn({70, 1027}) * 0.1).to(type);
    for (std::int64_t rows = 1; rows <= 8; ++rows) {
        const at::Tensor x = at::randn({rows, 1027}).to(type);
        const at::Tensor streamed = small_batch_linear(x, weight, {}, LinearKernel::vector);
        const at::Tensor tiled = small_batch_linear(x, weight, {}, LinearKernel::tiles);
        ASSERT_TRUE(streamed.defined() && tiled.defined());
        EXPECT_TRUE(streamed.equal(tiled)) << rows << " rows";
    }
}

// One row of a weight of several work chunks (256 rows each, taken by the threads as they
// arrive, the last one partial): every chunking gives the bits of the row inside a batch.
TEST_P(SmallBatchLinear, OneRowOverManyChunksMatchesItsRowInABatch) {
    const at::ScalarType type = GetParam();
    at::manual_seed(8);
    const at::Tensor weight = (at::randn({1000, 300}) * 0.1).to(type);
    const at::Tensor x = at::randn({5, 300}).to(type);
    const at::Tensor batch = small_batch_linear(x, weight);
    ASSERT_TRUE(batch.defined());
    EXPECT_TRUE(at::allclose(batch.to(at::kDouble), reference(x, weight, {}), 1e-2, 1e-2));
    struct RestoreThreads {
        int count = at::get_num_threads();
        ~RestoreThreads() { at::set_num_threads(count); }
    } restore;
    for (int threads : {1, 2, 3}) {
        at::set_num_threads(threads);
        for (std::int64_t row = 0; row < 5; ++row) {
            const at::Tensor alone = small_batch_linear(x.narrow(0, row, 1), weight);
            EXPECT_TRUE(alone[0].equal(batch[row])) << "threads " << threads << " row " << row;
        }
        const at::Tensor three = small_batch_linear(x.narrow(0, 1, 3), weight);
        EXPECT_TRUE(three.equal(batch.narrow(0, 1, 3))) << "threads " << threads;
    }
}

// float32 prefill: 300 rows in passes of 128 (the last partial) agree with float64 and give each
// row the bits it has alone and in a small batch (prefill rows == decode rows).
TEST(SmallBatchLinearFloat, PrefillRowsMatchTheirRowsAlone) {
    if (!small_batch_linear_supported(at::kFloat)) GTEST_SKIP() << "no AVX-512F";
    at::manual_seed(10);
    const at::Tensor weight = (at::randn({70, 1027}) * 0.1).to(at::kFloat);
    const at::Tensor x = at::randn({300, 1027});
    const at::Tensor all = small_batch_linear(x, weight);
    ASSERT_TRUE(all.defined());
    EXPECT_TRUE(at::allclose(all.to(at::kDouble), reference(x, weight, {}), 1e-5, 1e-5));
    for (const std::int64_t first : {std::int64_t{0}, std::int64_t{127}, std::int64_t{128},
                                     std::int64_t{255}, std::int64_t{299}}) {
        EXPECT_TRUE(
            small_batch_linear(x.narrow(0, first, 1), weight).equal(all.narrow(0, first, 1)))
            << first;
    }
    EXPECT_TRUE(small_batch_linear(x.narrow(0, 120, 20), weight).equal(all.narrow(0, 120, 20)));
}

TEST_P(SmallBatchLinear, ReadsStridedRows) {
    const at::ScalarType type = GetParam();
    at::manual_seed(5);
    // The second half of each row of a wider tensor (as swiglu_mlp passes its gate / up halves),
    // 100 wide: a tail after the full steps of 32 (and 16).
    const at::Tensor wide = at::randn({9, 228}).to(type);
    const at::Tensor x = wide.narrow(1, 128, 100);
    ASSERT_FALSE(x.is_contiguous());
    const at::Tensor weight = (at::randn({33, 100}) * 0.1).to(type);
    const at::Tensor y = small_batch_linear(x, weight);
    ASSERT_TRUE(y.defined());
    EXPECT_TRUE(y.equal(small_batch_linear(x.contiguous(), weight)));
    // The streaming path (up to four rows) reads strided rows too.
    const at::Tensor few = small_batch_linear(x.narrow(0, 2, 3), weight);
    ASSERT_TRUE(few.defined());
    EXPECT_TRUE(few.equal(y.narrow(0, 2, 3)));
}

// Without a bias, bfloat16 outputs are rounded inside the kernel's tasks; with one, the float32
// sums plus the bias go through at::Tensor::to. A zero bias adds nothing, so both must agree
// value for value: the kernel rounds as ATen does (to nearest even, ties and NaN included).
TEST_P(SmallBatchLinear, RoundsToBFloat16AsATenDoes) {
    if (GetParam() != at::kBFloat16) GTEST_SKIP() << "float32 outputs are not rounded";
    at::manual_seed(7);
    const at::Tensor weight = (at::randn({70, 1027}) * 0.1).to(at::kBFloat16);
    const at::Tensor zero = at::zeros({70}, at::kBFloat16);
    for (std::int64_t rows : {1, 3, 32}) {
        // Magnitudes over many binades, so that every rounding case occurs.
        const at::Tensor x =
            (at::randn({rows, 1027}) * at::exp(at::randn({rows, 1}) * 8)).to(at::kBFloat16);
        const at::Tensor kernel = small_batch_linear(x, weight);
        const at::Tensor through_aten = small_batch_linear(x, weight, zero);
        ASSERT_TRUE(kernel.defined());
        EXPECT_EQ(kernel.scalar_type(), at::kBFloat16);
        EXPECT_TRUE(kernel.equal(through_aten)) << rows;
    }
    // NaN in, NaN out (the canonical quiet NaN of c10::BFloat16).
    at::Tensor x = at::randn({1, 1027}).to(at::kBFloat16);
    x[0][5] = NAN;
    const at::Tensor y = small_batch_linear(x, weight);
    EXPECT_TRUE(at::isnan(y).all().item<bool>());
}

TEST_P(SmallBatchLinear, DeclinesWhatItDoesNotHandle) {
    const at::ScalarType type = GetParam();
    const at::Tensor weight = at::randn({8, 16}).to(type);
    // bfloat16 prefill rows go to oneDNN; float32 takes any number (FloatPrefillRows).
    EXPECT_EQ(
        small_batch_linear(at::randn({kSmallBatchMaxRows + 1, 16}).to(type), weight).defined(),
        type == at::kFloat);
    EXPECT_FALSE(small_batch_linear(at::randn({0, 16}).to(type), weight).defined());
    EXPECT_FALSE(small_batch_linear(at::randn({2, 16}).to(at::kDouble), weight).defined());
    EXPECT_FALSE(small_batch_linear(at::randn({2, 16}).to(type), weight.t().contiguous().t())
                     .defined());  // a weight that is not contiguous
    EXPECT_FALSE(small_batch_linear(at::randn({2, 15}).to(type), weight).defined());
    EXPECT_FALSE(small_batch_linear(at::randn({2, 16}).to(type), at::randn({8, 16}).to(at::kHalf))
                     .defined());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SmallBatchLinear, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

}  // namespace
}  // namespace omnirt::engine::cpu

// engine::cpu::amx: the AMX kernel's sums against float64, and the
// property the engine relies on (a row alone == its row in a batch) through small_batch_linear on
// shapes that take the AMX kernel, at every row count and several thread counts.
#include "engine/cpu_linear_amx.h"

#include "engine/cpu_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

namespace omnirt::engine::cpu {
namespace {

class AmxLinear : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!amx::available()) GTEST_SKIP() << "this CPU (or kernel) gives no AMX-BF16 tiles";
    }
};

const std::uint16_t* bits_of(const at::Tensor& t) {
    return reinterpret_cast<const std::uint16_t*>(t.data_ptr());
}

// float32 sums of exact bfloat16 products: within float32 rounding of the float64 sum, bounded by
// the sum of the products' magnitudes (the tile unit's internal order of additions is its own;
// measured here it is not one serial chain of fused multiply-adds, nor pairs added first).
TEST_F(AmxLinear, SumsAgreeWithFloat64ToFloat32Rounding) {
    at::manual_seed(11);
    for (std::int64_t in : {32, 1024}) {
        for (std::int64_t out : {16, 48, 80, 272}) {
            const at::Tensor weight = (at::randn({out, in}) * 0.1).to(at::kBFloat16);
            for (std::int64_t rows : {1, 3, 16, 17, 40, 64}) {
                const at::Tensor x = at::randn({rows, in}).to(at::kBFloat16);
                const std::vector<std::uint16_t> packed = amx::pack_rows(bits_of(x), in, rows, in);
                std::vector<float> y(static_cast<std::size_t>(rows * out), -1.0f);
                amx::rows_range(packed.data(), rows, bits_of(weight), in, 0, out, y.data(), out);
                const at::Tensor x64 = x.to(at::kDouble);
                const at::Tensor w64 = weight.to(at::kDouble);
                const at::Tensor expected = at::matmul(x64, w64.t());
                const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
                const at::Tensor got =
                    at::from_blob(y.data(), {rows, out}, at::kFloat).to(at::kDouble);
                const at::Tensor error = (got - expected).abs() - magnitude * 1e-6;
                EXPECT_LE(error.max().item<double>(), 0.0)
                    << "in " << in << " out " << out << " rows " << rows;
            }
        }
    }
}

// A sub-range of weight rows writes exactly its columns (the others stay untouched), and input
// rows read with a stride (every other row of a wider tensor) pack like contiguous ones.
TEST_F(AmxLinear, WritesOnlyItsColumnsAndReadsStridedRows) {
    at::manual_seed(12);
    const std::int64_t in = 96;
    const std::int64_t out = 64;
    const at::Tensor weight = at::randn({out, in}).to(at::kBFloat16);
    const at::Tensor wide = at::randn({5, 2 * in}).to(at::kBFloat16);
    const std::vector<std::uint16_t> strided = amx::pack_rows(bits_of(wide), 2 * in, 5, in);
    const at::Tensor x = wide.narrow(1, 0, in).contiguous();
    EXPECT_EQ(strided, amx::pack_rows(bits_of(x), in, 5, in));
    std::vector<float> y(static_cast<std::size_t>(5 * out), -7.0f);
    amx::rows_range(strided.data(), 5, bits_of(weight), in, 16, 48, y.data(), out);
    std::vector<float> whole(static_cast<std::size_t>(5 * out));
    amx::rows_range(strided.data(), 5, bits_of(weight), in, 0, out, whole.data(), out);
    for (std::int64_t m = 0; m < 5; ++m) {
        for (std::int64_t n = 0; n < out; ++n) {
            const auto i = static_cast<std::size_t>(m * out + n);
            EXPECT_EQ(y[i], n >= 16 && n < 48 ? whole[i] : -7.0f) << m << ", " << n;
        }
    }
}

TEST(AmxLinearShapes, TakesOnlyWholeTiles) {
    EXPECT_TRUE(amx::shape_supported(1024, 3072));
    EXPECT_TRUE(amx::shape_supported(32, 16));
    EXPECT_FALSE(amx::shape_supported(1027, 3072));
    EXPECT_FALSE(amx::shape_supported(1024, 70));
    EXPECT_FALSE(amx::shape_supported(0, 16));
}

// Through the engine's entry point: every row count 1..64 at three offsets equals its rows in a
// batch of 64, on a weight of two work chunks (256 rows and a partial one), at 1-3 threads; and
// the result agrees with a float64 matmul to bfloat16 rounding.
TEST_F(AmxLinear, RowsAloneMatchTheirRowsInABatch) {
    at::manual_seed(13);
    const at::Tensor weight = (at::randn({272, 256}) * 0.1).to(at::kBFloat16);
    const at::Tensor x = at::randn({kSmallBatchMaxRows, 256}).to(at::kBFloat16);
    const at::Tensor batch = small_batch_linear(x, weight, {}, LinearKernel::amx);
    ASSERT_TRUE(batch.defined());
    const at::Tensor expected = at::matmul(x.to(at::kDouble), weight.to(at::kDouble).t());
    EXPECT_TRUE(at::allclose(batch.to(at::kDouble), expected, 1e-2, 1e-2));
    struct RestoreThreads {
        int count = at::get_num_threads();
        ~RestoreThreads() { at::set_num_threads(count); }
    } restore;
    for (int threads : {1, 2, 3}) {
        at::set_num_threads(threads);
        for (std::int64_t rows = 1; rows <= kSmallBatchMaxRows; ++rows) {
            for (const std::int64_t first :
                 {std::int64_t{0}, (kSmallBatchMaxRows - rows) / 2, kSmallBatchMaxRows - rows}) {
                const at::Tensor few =
                    small_batch_linear(x.narrow(0, first, rows), weight, {}, LinearKernel::amx);
                ASSERT_TRUE(few.defined());
                ASSERT_TRUE(few.equal(batch.narrow(0, first, rows)))
                    << rows << " rows at " << first << ", threads " << threads;
            }
        }
    }
}

}  // namespace
}  // namespace omnirt::engine::cpu

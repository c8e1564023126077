// engine::cpu::PackedWeight: the 12-bit packing of bfloat16 decode weights gives every value back
// bit for bit (escapes, NaN, infinities, signed zeros, subnormals), and small_batch_linear over
// it gives the bits of the bfloat16 kernels for one to four rows; what pack() declines.
#include "engine/cpu_packed_weight.h"

#include "engine/cpu_linear.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace omnirt::engine::cpu {
namespace {

// Bitwise equality (NaN outputs compare by their bits).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
    return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
           a.contiguous().view(at::kShort).equal(b.contiguous().view(at::kShort));
}

// A weight of normal values with `specials` bit patterns written at spread positions.
at::Tensor weight_with(std::int64_t out, std::int64_t in,
                       const std::vector<std::uint16_t>& specials, std::int64_t stride) {
    at::Tensor weight = (at::randn({out, in}) * 0.02).to(at::kBFloat16);
    auto* bits = reinterpret_cast<std::uint16_t*>(weight.data_ptr());
    for (std::size_t i = 0; i < specials.size(); ++i) {
        bits[(static_cast<std::int64_t>(i) * stride) % (out * in)] = specials[i];
    }
    return weight;
}

class PackedWeightTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!small_batch_linear_supported(at::kBFloat16)) {
            GTEST_SKIP() << "this CPU lacks AVX512-BF16";
        }
        if (!PackedWeight::pack(at::zeros({1, 32}, at::kBFloat16))) {
            GTEST_SKIP() << "packing is off (OMNIRT_CPU_PACK=0) or the CPU lacks AVX512-VL";
        }
    }
};

TEST_F(PackedWeightTest, EveryValueComesBackBitForBit) {
    at::manual_seed(11);
    // NaN (two payloads), +-Inf, +-0, subnormals, the largest finite, a huge and a tiny normal:
    // high bytes the table of a 0.02-scaled weight does not hold, so escapes, several in one
    // block (stride 3) and across rows.
    const std::vector<std::uint16_t> specials = {0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x0000, 0x8000,
                                                 0x0001, 0x8003, 0x7F7F, 0x4B00, 0x0080, 0xC2F7};
    for (const std::int64_t stride : {3, 1000, 4099}) {
        const at::Tensor weight = weight_with(48, 1024, specials, stride);
        const PackedWeightPtr packed = PackedWeight::pack(weight);
        ASSERT_TRUE(packed) << "stride " << stride;
        EXPECT_EQ(packed->out(), 48);
        EXPECT_EQ(packed->in(), 1024);
        EXPECT_GE(packed->escape_count(), 8) << "the specials escape the table";
        EXPECT_LT(packed->bytes(), weight.numel() * 2 * 4 / 5) << "12 bits per weight, not 16";
        EXPECT_TRUE(same_bits(packed->unpack(), weight)) << "stride " << stride;
    }
}

TEST_F(PackedWeightTest, OneToFourRowsGiveTheBfloat16KernelsBits) {
    at::manual_seed(12);
    const std::vector<std::uint16_t> specials = {0x0001, 0x8000, 0x4B00, 0x0080, 0xC2F7, 0x3F80};
    // Row groups full and partial (out 1, 15, 16, 17, 70, 300), widths of 1 to 96 blocks.
    for (const std::int64_t in : {32, 96, 3072}) {
        for (const std::int64_t out : {1, 15, 16, 17, 70, 300}) {
            // Escapes up to 1 in 512 weights (pack() takes up to 1 in 256).
            const std::vector<std::uint16_t> some(
                specials.begin(), specials.begin() + std::min<std::int64_t>(6, out * in / 512));
            const at::Tensor weight = weight_with(out, in, some, 37);
            const PackedWeightPtr packed = PackedWeight::pack(weight);
            ASSERT_TRUE(packed) << out << " x " << in;
            const at::Tensor x = at::randn({32, in}).to(at::kBFloat16);
            const at::Tensor bias = at::randn({out}).to(at::kBFloat16);
            const at::Tensor batch = small_batch_linear(x, weight, {}, LinearKernel::tiles);
            for (std::int64_t rows = 1; rows <= 4; ++rows) {
                const at::Tensor few = x.narrow(0, 3, rows);
                const at::Tensor plain = small_batch_linear(few, weight, {}, LinearKernel::vector);
                const at::Tensor from_packed =
                    small_batch_linear(few, weight, {}, LinearKernel::vector, packed.get());
                ASSERT_TRUE(from_packed.defined());
                EXPECT_TRUE(same_bits(from_packed, plain))
                    << rows << " rows, " << out << " x " << in;
                EXPECT_TRUE(same_bits(from_packed, batch.narrow(0, 3, rows)))
                    << rows << " rows alone == in a batch of 32, " << out << " x " << in;
                EXPECT_TRUE(same_bits(
                    small_batch_linear(few, weight, bias, LinearKernel::vector, packed.get()),
                    small_batch_linear(few, weight, bias, LinearKernel::vector)))
                    << "with a bias";
            }
        }
    }
}

// A float32 weight of bfloat16 values (a bfloat16 checkpoint served in float32) packs too: its
// values come back, and one to eight float32 rows give the bits of the float32 kernels (the
// streaming kernel up to four rows, the tiles at every count).
TEST_F(PackedWeightTest, Float32WeightsOfBfloat16ValuesGiveTheFloat32KernelsBits) {
    at::manual_seed(16);
    const std::vector<std::uint16_t> specials = {0x0001, 0x8000, 0x4B00, 0x0080, 0xC2F7, 0x7FC0};
    for (const std::int64_t in : {32, 3072}) {
        for (const std::int64_t out : {1, 17, 300}) {
            const std::vector<std::uint16_t> some(
                specials.begin(), specials.begin() + std::min<std::int64_t>(6, out * in / 512));
            const at::Tensor weight = weight_with(out, in, some, 41).to(at::kFloat);
            const PackedWeightPtr packed = PackedWeight::pack(weight);
            ASSERT_TRUE(packed) << out << " x " << in;
            EXPECT_EQ(packed->dtype(), at::kFloat);
            const at::Tensor back = packed->unpack();
            EXPECT_EQ(back.scalar_type(), at::kFloat);
            EXPECT_TRUE(back.view(at::kInt).equal(weight.view(at::kInt)));
            const at::Tensor x = at::randn({32, in});
            const at::Tensor batch = small_batch_linear(x, weight, {}, LinearKernel::tiles);
            for (std::int64_t rows = 1; rows <= kPackedFloatRows; ++rows) {
                const at::Tensor few = x.narrow(0, 2, rows);
                const at::Tensor from_packed =
                    small_batch_linear(few, weight, {}, LinearKernel::vector, packed.get());
                ASSERT_TRUE(from_packed.defined());
                EXPECT_TRUE(
                    from_packed.view(at::kInt).equal(batch.narrow(0, 2, rows).view(at::kInt)))
                    << rows << " rows, " << out << " x " << in;
                if (rows <= 4) {
                    EXPECT_TRUE(from_packed.view(at::kInt).equal(
                        small_batch_linear(few, weight, {}, LinearKernel::vector).view(at::kInt)))
                        << rows << " rows against the streaming kernel";
                }
            }
        }
    }
    // One value that is not a bfloat16: not packed.
    at::Tensor inexact = (at::randn({16, 64}) * 0.02).to(at::kBFloat16).to(at::kFloat);
    inexact[3][5] = 0.1f;
    EXPECT_FALSE(PackedWeight::pack(inexact));
}

// A strided view packs as its values (the packing reads a contiguous copy).
TEST_F(PackedWeightTest, AStridedViewPacksItsValues) {
    at::manual_seed(13);
    const at::Tensor full = (at::randn({64, 128}) * 0.05).to(at::kBFloat16);
    const at::Tensor columns = full.narrow(1, 32, 64);
    const PackedWeightPtr packed = PackedWeight::pack(columns);
    ASSERT_TRUE(packed);
    EXPECT_TRUE(same_bits(packed->unpack(), columns.contiguous()));
}

TEST_F(PackedWeightTest, DeclinesWhatTheKernelDoesNotTake) {
    at::manual_seed(14);
    EXPECT_FALSE(PackedWeight::pack(at::Tensor{}));
    EXPECT_FALSE(PackedWeight::pack(at::randn({16, 64})));                      // float32
    EXPECT_FALSE(PackedWeight::pack(at::randn({16, 100}).to(at::kBFloat16)));   // in % 32
    EXPECT_FALSE(PackedWeight::pack(at::randn({64}).to(at::kBFloat16)));        // 1-D
    EXPECT_FALSE(PackedWeight::pack(at::empty({0, 64}, at::kBFloat16)));        // no rows
    EXPECT_FALSE(PackedWeight::pack(at::randn({2, 2, 64}).to(at::kBFloat16)));  // 3-D
    // Random bit patterns: high bytes spread over all 256 values, far more than 1 in 256 weights
    // would escape.
    const at::Tensor noise = at::randint(-32768, 32767, {64, 256}, at::kShort).view(at::kBFloat16);
    EXPECT_FALSE(PackedWeight::pack(noise));
}

// A packed weight of another shape, more than four rows, or the tiles kernel: the packing is not
// used and the results are the plain kernels'.
TEST_F(PackedWeightTest, IsIgnoredWhereItDoesNotApply) {
    at::manual_seed(15);
    const at::Tensor weight = (at::randn({40, 64}) * 0.05).to(at::kBFloat16);
    const at::Tensor other = (at::randn({40, 96}) * 0.05).to(at::kBFloat16);
    const PackedWeightPtr wrong = PackedWeight::pack(other);
    ASSERT_TRUE(wrong);
    const at::Tensor x = at::randn({8, 64}).to(at::kBFloat16);
    for (std::int64_t rows : {1, 4, 8}) {
        const at::Tensor few = x.narrow(0, 0, rows);
        EXPECT_TRUE(
            same_bits(small_batch_linear(few, weight, {}, LinearKernel::vector, wrong.get()),
                      small_batch_linear(few, weight, {}, LinearKernel::vector)));
    }
    const PackedWeightPtr packed = PackedWeight::pack(weight);
    ASSERT_TRUE(packed);
    EXPECT_TRUE(same_bits(small_batch_linear(x, weight, {}, LinearKernel::tiles, packed.get()),
                          small_batch_linear(x, weight, {}, LinearKernel::tiles)));
}

}  // namespace
}  // namespace omnirt::engine::cpu

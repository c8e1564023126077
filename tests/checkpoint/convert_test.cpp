// f32 <-> bf16 <-> f16 conversions: exact widening, round-to-nearest-even narrowing, NaN / Inf,
// f16 subnormals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "checkpoint/convert.h"

namespace omnirt::checkpoint {
namespace {

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(Bf16, RoundsToNearestEven) {
    // Exactly representable values convert exactly.
    EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
    EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
    EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
    EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
    // Below half an ulp rounds down, above rounds up.
    EXPECT_EQ(float_to_bf16(from_bits(0x3F807FFF)), 0x3F80);
    EXPECT_EQ(float_to_bf16(from_bits(0x3F808001)), 0x3F81);
    // Ties go to the even neighbour.
    EXPECT_EQ(float_to_bf16(from_bits(0x3F808000)), 0x3F80);  // 0x3F80 is even
    EXPECT_EQ(float_to_bf16(from_bits(0x3F818000)), 0x3F82);  // 0x3F81 is odd
    // A carry into the exponent.
    EXPECT_EQ(float_to_bf16(from_bits(0x3FFFFFFF)), 0x4000);
    // The largest float rounds to infinity; infinities stay.
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
    EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
    // Subnormals round like any other value.
    EXPECT_EQ(float_to_bf16(from_bits(0x00008000)), 0x0000);
    EXPECT_EQ(float_to_bf16(from_bits(0x00018000)), 0x0002);
}

TEST(Bf16, NanStaysNanWithItsSign) {
    const std::uint16_t quiet = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_TRUE(std::isnan(bf16_to_float(quiet)));
    // A NaN whose payload sits only in the dropped bits must not become infinity.
    const std::uint16_t low_payload = float_to_bf16(from_bits(0x7F800001));
    EXPECT_TRUE(std::isnan(bf16_to_float(low_payload)));
    EXPECT_EQ(low_payload & 0x8000, 0);
    const std::uint16_t negative = float_to_bf16(from_bits(0xFF800001));
    EXPECT_TRUE(std::isnan(bf16_to_float(negative)));
    EXPECT_EQ(negative & 0x8000, 0x8000);
    // A NaN whose mantissa would round up into the sign bit stays a NaN too.
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7FFFFFFF)))));
}

TEST(Bf16, EveryBf16ValueRoundTripsExactly) {
    for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
        const float value = bf16_to_float(static_cast<std::uint16_t>(bits));
        if (std::isnan(value)) continue;
        ASSERT_EQ(float_to_bf16(value), bits) << std::hex << bits;
    }
}

TEST(F16, EveryF16ValueRoundTripsExactly) {
    for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
        const float value = f16_to_float(static_cast<std::uint16_t>(bits));
        if (std::isnan(value)) {
            EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(value))));
            continue;
        }
        ASSERT_EQ(float_to_f16(value), bits) << std::hex << bits;
    }
}

TEST(F16, KnownValuesOverflowAndSubnormals) {
    EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
    EXPECT_EQ(float_to_f16(-2.0f), 0xC000);
    EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
    EXPECT_EQ(float_to_f16(65519.0f), 0x7BFF);  // below the tie: largest finite
    EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);  // the tie rounds to even: infinity
    EXPECT_EQ(float_to_f16(1e10f), 0x7C00);
    EXPECT_EQ(float_to_f16(-1e10f), 0xFC00);
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
    EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 ulp: tie to even 2
    EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
    EXPECT_EQ(float_to_f16(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounds up to normal
    EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
    EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie: even
    EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie: even
    EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(from_bits(0x7F800001)))));
    EXPECT_EQ(f16_to_float(0x7C00), std::numeric_limits<float>::infinity());
}

#if defined(__FLT16_MAX__) && !defined(__clang__)
// The compiler's own float -> _Float16 conversion (IEEE round-to-nearest-even) as the oracle.
TEST(F16, MatchesTheCompilersConversion) {
    std::mt19937 random(7);
    for (int i = 0; i < 2'000'000; ++i) {
        std::uint32_t bits = random();
        // Bias towards the f16 range so that normal, subnormal and overflow cases all appear.
        if (i % 2) bits = (bits & 0x807FFFFF) | ((0x60 + (bits >> 24) % 0x40) << 23);
        const float value = from_bits(bits);
        if (std::isnan(value)) continue;
        const _Float16 expected = static_cast<_Float16>(value);
        ASSERT_EQ(float_to_f16(value), std::bit_cast<std::uint16_t>(expected)) << std::hex << bits;
    }
}
#endif

TEST(ConvertTensor, BetweenFloatTypesAndCopies) {
    Tensor source = Tensor::from_vector<float>({1.0f, 0.1f, -3.5f, 65504.0f, 1e-8f}, {5});
    auto bf16 = convert_dtype(source, DType::bf16);
    ASSERT_TRUE(bf16);
    EXPECT_EQ(bf16->dtype(), DType::bf16);
    EXPECT_FALSE(bf16->read_only());
    auto back = convert_dtype(*bf16, DType::f32);
    ASSERT_TRUE(back);
    const float* values = back->data_as<float>();
    EXPECT_EQ(values[0], 1.0f);
    EXPECT_EQ(values[1], bf16_to_float(float_to_bf16(0.1f)));
    EXPECT_EQ(values[2], -3.5f);
    auto f16 = convert_dtype(*bf16, DType::f16);
    ASSERT_TRUE(f16);
    // bf16 -> f16 equals bf16 -> f32 -> f16 (one rounding).
    for (int i = 0; i < 5; ++i) {
        std::uint16_t half;
        std::memcpy(&half, f16->data() + 2 * i, 2);
        EXPECT_EQ(half, float_to_f16(values[i]));
    }
    auto same = convert_dtype(source, DType::f32);
    ASSERT_TRUE(same);
    EXPECT_TRUE(same->equals(source));
    EXPECT_NE(same->data(), source.data());  // a copy
    auto ints = convert_dtype(Tensor::from_vector<std::int32_t>({1}), DType::f32);
    ASSERT_FALSE(ints);
    EXPECT_EQ(ints.error().code, ErrorCode::unimplemented);
    EXPECT_TRUE(convert_dtype(Tensor::from_vector<std::int32_t>({1}), DType::i32));
}

}  // namespace
}  // namespace omnirt::checkpoint

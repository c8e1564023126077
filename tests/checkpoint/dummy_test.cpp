// load_format dummy: seeded random weights, deterministic across runs, machines and chunkings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "checkpoint/convert.h"
#include "checkpoint/dummy.h"

namespace omnirt::checkpoint {
namespace {

std::vector<float> as_floats(const Tensor& tensor) {
    auto f32 = convert_dtype(tensor, DType::f32);
    OMNI_CHECK(f32.has_value(), "convert");
    const float* data = f32->data_as<float>();
    return std::vector<float>(data, data + f32->numel());
}

TEST(Dummy, SameInputsSameBytes) {
    const TensorSpec spec{
        .name = "model.layers.0.mlp.up_proj.weight", .shape = {32, 16}, .dtype = DType::bf16};
    auto a = dummy_tensor(spec, {.seed = 7, .std = 0.02});
    auto b = dummy_tensor(spec, {.seed = 7, .std = 0.02});
    ASSERT_TRUE(a && b);
    EXPECT_TRUE(a->equals(*b));
    auto other_seed = dummy_tensor(spec, {.seed = 8, .std = 0.02});
    EXPECT_FALSE(a->equals(*other_seed));
    TensorSpec renamed = spec;
    renamed.name = "model.layers.1.mlp.up_proj.weight";
    EXPECT_FALSE(a->equals(*dummy_tensor(renamed, {.seed = 7, .std = 0.02})));
}

// Pinned values: a change here changes every generated checkpoint and dummy benchmark.
TEST(Dummy, ValuesArePinned) {
    auto tensor =
        dummy_tensor({.name = "w", .shape = {4}, .dtype = DType::f32}, {.seed = 42, .std = 1.0});
    ASSERT_TRUE(tensor);
    std::vector<std::uint32_t> bits(4);
    std::memcpy(bits.data(), tensor->data(), 16);
    EXPECT_THAT(bits, ::testing::ElementsAre(1063938646u, 1061737487u, 3213819832u, 1063174130u));
}

TEST(Dummy, ChunksAtAnyOffsetMatchTheWholeTensor) {
    const TensorSpec spec{.name = "x", .shape = {1000}, .dtype = DType::f16};
    auto whole = dummy_tensor(spec, {.seed = 3});
    ASSERT_TRUE(whole);
    std::vector<std::byte> pieces(whole->nbytes());
    for (std::size_t offset = 0; offset < pieces.size(); offset += 374) {
        const std::size_t size = std::min<std::size_t>(374, pieces.size() - offset);
        ASSERT_TRUE(fill_dummy(spec, {.seed = 3}, offset, std::span(pieces.data() + offset, size)));
    }
    EXPECT_EQ(std::memcmp(pieces.data(), whole->data(), pieces.size()), 0);
    std::byte odd[3];
    auto misaligned = fill_dummy(spec, {.seed = 3}, 1, odd);
    ASSERT_FALSE(misaligned);
    EXPECT_THAT(misaligned.error().message, ::testing::HasSubstr("element-aligned"));
}

// Tensors over 32 MiB fill in parallel slices; the bytes equal one serial fill.
TEST(Dummy, LargeTensorsFilledInSlicesMatchOneSerialFill) {
    const TensorSpec spec{.name = "embed", .shape = {4099, 4097}, .dtype = DType::bf16};  // ~32 MiB
    auto whole = dummy_tensor(spec, {.seed = 11});
    ASSERT_TRUE(whole);
    std::vector<std::byte> serial(whole->nbytes());
    ASSERT_TRUE(fill_dummy(spec, {.seed = 11}, 0, serial));
    EXPECT_EQ(std::memcmp(serial.data(), whole->data(), serial.size()), 0);
}

TEST(Dummy, MeanAndStandardDeviation) {
    for (double mean : {0.0, 1.0}) {
        auto tensor =
            dummy_tensor({.name = "n", .shape = {200000}, .dtype = DType::f32, .mean = mean},
                         {.seed = 1, .std = 0.02});
        ASSERT_TRUE(tensor);
        double sum = 0, squares = 0, low = 1e9, high = -1e9;
        for (float v : as_floats(*tensor)) {
            sum += v;
            squares += v * v;
            low = std::min<double>(low, v);
            high = std::max<double>(high, v);
        }
        const double n = 200000;
        const double m = sum / n;
        const double std = std::sqrt(squares / n - m * m);
        EXPECT_NEAR(m, mean, 0.0005);
        EXPECT_NEAR(std, 0.02, 0.0005);
        // Uniform: bounded by mean +- sqrt(3) std.
        EXPECT_GE(low, mean - 0.02 * std::sqrt(3.0) - 1e-6);
        EXPECT_LE(high, mean + 0.02 * std::sqrt(3.0) + 1e-6);
    }
}

TEST(Dummy, EveryDtypeAndIntegerZeros) {
    for (DType dtype : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
        auto tensor =
            dummy_tensor({.name = "w", .shape = {64}, .dtype = dtype}, {.seed = 5, .std = 0.5});
        ASSERT_TRUE(tensor);
        EXPECT_EQ(tensor->dtype(), dtype);
        bool nonzero = false;
        for (std::size_t i = 0; i < tensor->nbytes(); ++i)
            nonzero |= tensor->data()[i] != std::byte{0};
        EXPECT_TRUE(nonzero) << to_string(dtype);
    }
    auto ints = dummy_tensor({.name = "ids", .shape = {16}, .dtype = DType::i64}, {.seed = 5});
    ASSERT_TRUE(ints);
    EXPECT_TRUE(ints->equals(Tensor::from_vector<std::int64_t>(std::vector<std::int64_t>(16, 0))));
    auto bad = dummy_tensor({.name = "bad", .shape = {-1}, .dtype = DType::f32}, {});
    ASSERT_FALSE(bad);
    EXPECT_THAT(bad.error().message, ::testing::HasSubstr("tensor 'bad'"));
    auto many =
        dummy_tensors({{.name = "a", .shape = {2}}, {.name = "b", .shape = {3}}}, {.seed = 9});
    ASSERT_TRUE(many);
    ASSERT_EQ(many->size(), 2u);
    EXPECT_EQ((*many)[1].first, "b");
    EXPECT_EQ((*many)[1].second.numel(), 3);
}

}  // namespace
}  // namespace omnirt::checkpoint

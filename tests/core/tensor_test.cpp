#include "core/tensor.h"

#include <gtest/gtest.h>

#include <atomic>

namespace omnirt {
namespace {

TEST(DType, NamesRoundTripAndSizes) {
    const std::pair<DType, std::size_t> expected[] = {
        {DType::boolean, 1}, {DType::u8, 1},  {DType::i8, 1},   {DType::i16, 2}, {DType::i32, 4},
        {DType::i64, 8},     {DType::f16, 2}, {DType::bf16, 2}, {DType::f32, 4}, {DType::f64, 8}};
    for (auto [dtype, size] : expected) {
        EXPECT_EQ(element_size(dtype), size);
        auto parsed = parse_dtype(to_string(dtype));
        ASSERT_TRUE(parsed.has_value());
        EXPECT_EQ(*parsed, dtype);
    }
    EXPECT_FALSE(parse_dtype("float128").has_value());
    EXPECT_FALSE(dtype_from_code(10).has_value());
    EXPECT_FALSE(dtype_from_code(-1).has_value());
}

TEST(Device, Parse) {
    EXPECT_EQ(*parse_device("cpu"), Device::cpu());
    EXPECT_EQ(*parse_device("cuda"), Device::cuda(0));
    EXPECT_EQ(*parse_device("cuda:3"), Device::cuda(3));
    EXPECT_EQ(Device::cuda(3).to_string(), "cuda:3");
    for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CUDA:0", ""}) {
        auto r = parse_device(bad);
        ASSERT_FALSE(r.has_value()) << bad;
        EXPECT_NE(r.error().message.find("invalid device"), std::string::npos);
    }
}

TEST(Tensor, EmptyIsZeroedAndContiguous) {
    auto t = Tensor::empty({2, 3}, DType::f32);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->numel(), 6);
    EXPECT_EQ(t->nbytes(), 24u);
    EXPECT_TRUE(t->is_contiguous());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t->data()) % kTensorAlignment, 0u);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data_as<float>()[i], 0.0f);
}

TEST(Tensor, RejectsInvalidShapes) {
    EXPECT_FALSE(Tensor::empty({-1}, DType::f32).has_value());
    EXPECT_FALSE(Tensor::empty(Shape(17, 1), DType::f32).has_value());
    auto overflow = Tensor::empty({1LL << 40, 1LL << 40}, DType::f32);
    ASSERT_FALSE(overflow.has_value());
    EXPECT_EQ(overflow.error().code, ErrorCode::out_of_range);
}

TEST(Tensor, ZeroElementTensorsAreDefined) {
    auto t = Tensor::empty({0, 5}, DType::i64);
    ASSERT_TRUE(t.has_value());
    EXPECT_TRUE(t->defined());
    EXPECT_EQ(t->nbytes(), 0u);
    auto c = t->clone();
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(c->equals(*t));
}

TEST(Tensor, ZeroElementShapesWithHugeDimsDoNotOverflow) {
    auto strides = contiguous_strides({std::int64_t{1} << 62, 0, 4});
    EXPECT_EQ(strides[2], 1);
    EXPECT_EQ(strides[1], 4);
    auto storage = Storage::allocate(0);
    ASSERT_TRUE(storage.has_value());
    auto t = Tensor::from_storage(*storage, DType::f32, {std::int64_t{1} << 62, 0, 4}, {0, 7, 1});
    ASSERT_TRUE(t.has_value());
    EXPECT_TRUE(t->is_contiguous());  // nothing to lay out
}

TEST(Tensor, CustomDeleterRunsOnceWhenLastReferenceGoes) {
    std::atomic<int> deleted = 0;
    static std::byte buffer[64];
    {
        auto storage = Storage::wrap(
            buffer, sizeof buffer, Device::cpu(), [&](std::byte*) { deleted++; }, true);
        auto t = Tensor::from_storage(storage, DType::u8, {64});
        ASSERT_TRUE(t.has_value());
        Tensor copy = *t;
        EXPECT_TRUE(copy.read_only());
        EXPECT_EQ(copy.data(), buffer);
    }
    EXPECT_EQ(deleted, 1);
}

TEST(Tensor, FromStorageChecksBounds) {
    auto storage = Storage::allocate(16);
    ASSERT_TRUE(storage.has_value());
    EXPECT_TRUE(Tensor::from_storage(*storage, DType::f32, {4}).has_value());
    EXPECT_FALSE(Tensor::from_storage(*storage, DType::f32, {5}).has_value());
    EXPECT_FALSE(Tensor::from_storage(*storage, DType::f32, {4}, {}, 4).has_value());
    EXPECT_FALSE(Tensor::from_storage(*storage, DType::f32, {2, 2}, {3, 1}).has_value());
    EXPECT_FALSE(Tensor::from_storage(*storage, DType::f32, {2}, {1, 1}).has_value());
    EXPECT_FALSE(Tensor::from_storage(*storage, DType::f32, {1}, {}, 17).has_value());
    EXPECT_FALSE(Tensor::from_storage(nullptr, DType::f32, {1}).has_value());
}

TEST(Tensor, StridedViewCopiesInRowMajorOrder) {
    // A 3x2 transpose view of a contiguous 2x3 tensor.
    Tensor base = Tensor::from_vector<std::int32_t>({0, 1, 2, 3, 4, 5}, {2, 3});
    auto view = Tensor::from_storage(base.storage(), DType::i32, {3, 2}, {1, 3});
    ASSERT_TRUE(view.has_value());
    EXPECT_FALSE(view->is_contiguous());
    auto dense = view->contiguous();
    ASSERT_TRUE(dense.has_value());
    EXPECT_TRUE(dense->is_contiguous());
    const std::int32_t expected[] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(dense->data_as<std::int32_t>()[i], expected[i]);
    EXPECT_TRUE(view->equals(*dense));
    EXPECT_FALSE(base.equals(*dense));
}

TEST(Tensor, EqualsComparesDtypeShapeAndBytes) {
    Tensor a = Tensor::from_vector<float>({1, 2, 3});
    Tensor b = Tensor::from_vector<float>({1, 2, 3});
    Tensor c = Tensor::from_vector<float>({1, 2, 4});
    Tensor d = Tensor::from_vector<std::int32_t>({1, 2, 3});
    EXPECT_TRUE(a.equals(b));
    EXPECT_FALSE(a.equals(c));
    EXPECT_FALSE(a.equals(d));
    EXPECT_FALSE(a.equals(Tensor()));
}

TEST(TensorDeathTest, MutableDataOnReadOnlyStorageAborts) {
    static std::byte buffer[8];
    auto storage = Storage::wrap(buffer, 8, Device::cpu(), nullptr, true);
    auto t = Tensor::from_storage(storage, DType::u8, {8});
    ASSERT_TRUE(t.has_value());
    EXPECT_DEATH((void)t->mutable_data(), "read-only");
}

}  // namespace
}  // namespace omnirt

#include "torch_bridge/torch_tensor.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace omnirt::torch_bridge {
namespace {

constexpr DType kAllDTypes[] = {DType::boolean, DType::u8,  DType::i8,   DType::i16, DType::i32,
                                DType::i64,     DType::f16, DType::bf16, DType::f32, DType::f64};

std::vector<std::byte> bytes_of(const Tensor& tensor) {
    std::vector<std::byte> out(tensor.nbytes());
    tensor.copy_to(out);
    return out;
}

std::vector<std::byte> bytes_of(const at::Tensor& tensor) {
    at::Tensor contiguous = tensor.contiguous();
    std::vector<std::byte> out(contiguous.nbytes());
    if (!out.empty()) std::memcpy(out.data(), contiguous.data_ptr(), out.size());
    return out;
}

// 0, 1, 2, ... in `type` (bool: alternating), shape {2, 3}.
at::Tensor sample(at::ScalarType type) {
    at::Tensor values = at::arange(6, at::kLong).reshape({2, 3});
    if (type == at::kBool) return (values % 2).to(at::kBool);
    return values.to(type);
}

class EveryDType : public ::testing::TestWithParam<DType> {};

TEST_P(EveryDType, TorchToOmnirtToTorchSharesMemoryAndKeepsValues) {
    const DType dtype = GetParam();
    at::Tensor original = sample(to_scalar_type(dtype));

    auto converted = from_torch(original);
    ASSERT_TRUE(converted.has_value()) << converted.error().to_string();
    EXPECT_EQ(converted->dtype(), dtype);
    EXPECT_EQ(converted->shape(), (Shape{2, 3}));
    EXPECT_EQ(converted->strides(), (std::vector<std::int64_t>{3, 1}));
    EXPECT_EQ(converted->data(), static_cast<const std::byte*>(original.data_ptr()));
    EXPECT_EQ(bytes_of(*converted), bytes_of(original));

    at::Tensor back = to_torch(*converted);
    EXPECT_EQ(back.scalar_type(), original.scalar_type());
    EXPECT_EQ(back.sizes(), original.sizes());
    EXPECT_EQ(back.strides(), original.strides());
    EXPECT_EQ(back.data_ptr(), original.data_ptr());
    EXPECT_TRUE(back.equal(original));
}

TEST_P(EveryDType, OmnirtToTorchSharesMemoryBothWays) {
    const DType dtype = GetParam();
    auto tensor = Tensor::empty({4}, dtype);
    ASSERT_TRUE(tensor.has_value());
    at::Tensor view = to_torch(*tensor);
    EXPECT_EQ(view.scalar_type(), to_scalar_type(dtype));
    EXPECT_EQ(view.sizes(), at::IntArrayRef({4}));
    EXPECT_TRUE(view.device().is_cpu());
    ASSERT_EQ(view.data_ptr(), static_cast<void*>(tensor->mutable_data()));

    // Writes through libtorch are visible to omnirt, and the other way round.
    view.copy_(sample(to_scalar_type(dtype)).flatten().narrow(0, 1, 4));
    EXPECT_EQ(bytes_of(*tensor), bytes_of(view));
    std::memset(tensor->mutable_data(), 0, tensor->nbytes());
    EXPECT_TRUE(view.equal(at::zeros({4}, view.options())));
}

INSTANTIATE_TEST_SUITE_P(TorchBridge, EveryDType, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(TorchBridge, StridedTorchViewKeepsOffsetAndStrides) {
    at::Tensor base = at::arange(24, at::kFloat).reshape({4, 6});
    at::Tensor view = base.t().slice(/*dim=*/0, /*start=*/1, /*end=*/5, /*step=*/2);  // {2, 4}
    ASSERT_FALSE(view.is_contiguous());
    auto converted = from_torch(view);
    ASSERT_TRUE(converted.has_value()) << converted.error().to_string();
    EXPECT_EQ(converted->shape(), (Shape{2, 4}));
    EXPECT_EQ(converted->strides(), (std::vector<std::int64_t>{2, 6}));
    EXPECT_EQ(converted->storage_offset(), sizeof(float));
    EXPECT_FALSE(converted->is_contiguous());
    EXPECT_EQ(bytes_of(*converted), bytes_of(view));

    at::Tensor back = to_torch(*converted);
    EXPECT_EQ(back.strides(), view.strides());
    EXPECT_EQ(back.data_ptr(), view.data_ptr());
    EXPECT_TRUE(back.equal(view));
}

TEST(TorchBridge, StridedOmnirtViewKeepsOffsetAndStrides) {
    std::vector<float> values(24);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    Tensor base = Tensor::from_vector(values, {4, 6});
    // Column 2..3 of every other row: offset 2 elements, strides {12, 1}.
    auto view =
        Tensor::from_storage(base.storage(), DType::f32, {2, 2}, {12, 1}, 2 * sizeof(float));
    ASSERT_TRUE(view.has_value());
    at::Tensor converted = to_torch(*view);
    EXPECT_EQ(converted.strides(), at::IntArrayRef({12, 1}));
    at::Tensor expected =
        at::arange(24, at::kFloat).reshape({4, 6}).slice(0, 0, 4, 2).slice(1, 2, 4);
    EXPECT_TRUE(converted.equal(expected));
}

TEST(TorchBridge, ZeroElementTensorsConvert) {
    at::Tensor empty = at::empty({0, 3}, at::kFloat);
    auto converted = from_torch(empty);
    ASSERT_TRUE(converted.has_value()) << converted.error().to_string();
    EXPECT_EQ(converted->numel(), 0);
    EXPECT_EQ(converted->shape(), (Shape{0, 3}));

    auto omnirt_empty = Tensor::empty({0}, DType::i32);
    ASSERT_TRUE(omnirt_empty.has_value());
    at::Tensor back = to_torch(*omnirt_empty);
    EXPECT_EQ(back.numel(), 0);
    EXPECT_EQ(back.scalar_type(), at::kInt);
}

TEST(TorchBridge, UndefinedStaysUndefined) {
    EXPECT_FALSE(to_torch(Tensor{}).defined());
    auto converted = from_torch(at::Tensor{});
    ASSERT_TRUE(converted.has_value());
    EXPECT_FALSE(converted->defined());
}

TEST(TorchBridge, OmnirtMemoryIsFreedOnlyWhenBothSidesAreGone) {
    for (bool torch_goes_first : {true, false}) {
        bool freed = false;
        std::vector<std::byte> memory(16);
        auto storage = Storage::wrap(
            memory.data(), memory.size(), Device::cpu(), [&freed](std::byte*) { freed = true; },
            false);
        auto tensor = Tensor::from_storage(std::move(storage), DType::f32, {4});
        ASSERT_TRUE(tensor.has_value());
        at::Tensor view = to_torch(*tensor);
        at::Tensor derived = view.narrow(0, 1, 2);  // views libtorch derives keep it too
        view.reset();
        if (torch_goes_first) {
            derived.reset();
            EXPECT_FALSE(freed);
            tensor = Tensor{};
        } else {
            tensor = Tensor{};
            EXPECT_FALSE(freed);
            derived.reset();
        }
        EXPECT_TRUE(freed) << "torch_goes_first=" << torch_goes_first;
    }
}

TEST(TorchBridge, TorchMemoryIsFreedOnlyWhenBothSidesAreGone) {
    for (bool omnirt_goes_first : {true, false}) {
        bool freed = false;
        std::vector<float> memory(8, 1.0f);
        at::Tensor blob = at::from_blob(
            memory.data(), {8}, [&freed](void*) { freed = true; }, at::kFloat);
        auto converted = from_torch(blob.narrow(0, 2, 4));
        ASSERT_TRUE(converted.has_value());
        blob.reset();
        if (omnirt_goes_first) {
            converted = Tensor{};
            EXPECT_TRUE(freed);
        } else {
            at::Tensor back = to_torch(*converted);
            converted = Tensor{};
            EXPECT_FALSE(freed);
            back.reset();
            EXPECT_TRUE(freed);
        }
    }
}

TEST(TorchBridge, UnsupportedTorchTensorsAreInvalidArgument) {
    auto complex = from_torch(at::zeros({2}, at::kComplexFloat));
    ASSERT_FALSE(complex.has_value());
    EXPECT_EQ(complex.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(complex.error().message.find("ComplexFloat"), std::string::npos);

    auto sparse = from_torch(at::eye(3).to_sparse());
    ASSERT_FALSE(sparse.has_value());
    EXPECT_EQ(sparse.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace omnirt::torch_bridge

#include <gtest/gtest.h>

#include <cstring>

#include "media/audio.h"

namespace omnirt::media {
namespace {

TEST(AudioFromTensor, MonoFloat32) {
    auto buffer = audio_from_tensor(Tensor::from_vector<float>({0.0f, 0.5f, -0.5f}), 24000);
    ASSERT_TRUE(buffer.has_value()) << buffer.error().to_string();
    EXPECT_EQ(buffer->sample_rate, 24000);
    EXPECT_EQ(buffer->channels, 1);
    EXPECT_EQ(buffer->samples, (std::vector<float>{0.0f, 0.5f, -0.5f}));
}

TEST(AudioFromTensor, ChannelsFirstIsInterleaved) {
    auto tensor = Tensor::from_vector<float>({1, 2, 3, 10, 20, 30}, {2, 3});
    auto buffer = audio_from_tensor(tensor, 16000);
    ASSERT_TRUE(buffer.has_value());
    EXPECT_EQ(buffer->channels, 2);
    EXPECT_EQ(buffer->samples, (std::vector<float>{1, 10, 2, 20, 3, 30}));
    auto back = audio_to_tensor(*buffer);
    ASSERT_TRUE(back.has_value());
    EXPECT_TRUE(back->equals(tensor));
}

TEST(AudioFromTensor, StridedViewIsGathered) {
    // The transpose of a [3, 2] tensor: [2, 3] with strides {1, 2}.
    auto base = Tensor::from_vector<float>({1, 10, 2, 20, 3, 30}, {3, 2});
    auto view = Tensor::from_storage(base.storage(), DType::f32, {2, 3}, {1, 2});
    ASSERT_TRUE(view.has_value());
    auto buffer = audio_from_tensor(*view, 16000);
    ASSERT_TRUE(buffer.has_value());
    EXPECT_EQ(buffer->samples, (std::vector<float>{1, 10, 2, 20, 3, 30}));
}

TEST(AudioFromTensor, Int16IsScaled) {
    auto buffer =
        audio_from_tensor(Tensor::from_vector<std::int16_t>({0, 16384, -32768, 32767}), 8000);
    ASSERT_TRUE(buffer.has_value());
    EXPECT_EQ(buffer->samples, (std::vector<float>{0.0f, 0.5f, -1.0f, 32767.0f / 32768.0f}));
}

TEST(AudioFromTensor, Float64) {
    auto buffer = audio_from_tensor(Tensor::from_vector<double>({0.25, -1.0}), 8000);
    ASSERT_TRUE(buffer.has_value());
    EXPECT_EQ(buffer->samples, (std::vector<float>{0.25f, -1.0f}));
}

Tensor half_tensor(DType dtype, const std::vector<std::uint16_t>& bits) {
    auto tensor = Tensor::empty({static_cast<std::int64_t>(bits.size())}, dtype);
    OMNI_CHECK(tensor.has_value(), "empty failed");
    std::memcpy(tensor->mutable_data(), bits.data(), bits.size() * 2);
    return *tensor;
}

TEST(AudioFromTensor, Float16) {
    // 0, 0.5, -1, 2^-24 (smallest subnormal), 65504 (largest finite).
    auto buffer =
        audio_from_tensor(half_tensor(DType::f16, {0x0000, 0x3800, 0xBC00, 0x0001, 0x7BFF}), 8000);
    ASSERT_TRUE(buffer.has_value());
    EXPECT_EQ(buffer->samples,
              (std::vector<float>{0.0f, 0.5f, -1.0f, 5.9604644775390625e-08f, 65504.0f}));
}

TEST(AudioFromTensor, BFloat16) {
    auto buffer = audio_from_tensor(half_tensor(DType::bf16, {0x0000, 0x3F00, 0xBF80}), 8000);
    ASSERT_TRUE(buffer.has_value());
    EXPECT_EQ(buffer->samples, (std::vector<float>{0.0f, 0.5f, -1.0f}));
}

TEST(AudioFromTensor, RejectsWhatIsNotAudio) {
    EXPECT_FALSE(audio_from_tensor(Tensor(), 24000).has_value());
    EXPECT_FALSE(audio_from_tensor(Tensor::from_vector<std::int32_t>({1, 2}), 24000).has_value());
    EXPECT_FALSE(audio_from_tensor(Tensor::from_vector<float>({1, 2}), 0).has_value());
    EXPECT_FALSE(
        audio_from_tensor(Tensor::from_vector<float>({1, 2, 3, 4}, {1, 2, 2}), 24000).has_value());
    auto too_many_channels = Tensor::empty({100, 2}, DType::f32);
    ASSERT_TRUE(too_many_channels.has_value());
    auto rejected = audio_from_tensor(*too_many_channels, 24000);
    ASSERT_FALSE(rejected.has_value());
    EXPECT_EQ(rejected.error().code, ErrorCode::invalid_argument);
    auto no_channels = Tensor::empty({0, 5}, DType::f32);
    ASSERT_TRUE(no_channels.has_value());
    EXPECT_FALSE(audio_from_tensor(*no_channels, 24000).has_value());
}

TEST(AudioFromTensor, EmptyMonoIsAnEmptyBuffer) {
    auto empty = Tensor::empty({0}, DType::f32);
    ASSERT_TRUE(empty.has_value());
    auto buffer = audio_from_tensor(*empty, 24000);
    ASSERT_TRUE(buffer.has_value());
    EXPECT_TRUE(buffer->samples.empty());
}

}  // namespace
}  // namespace omnirt::media

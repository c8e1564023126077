// Code2Wav on a generated tiny checkpoint (random weights): bad inputs and bad weights give a
// clear error and no crash; the whole decoder is causal (a shorter call's audio is a prefix of a
// longer one's, across the attention's query blocks); the pre-transformer's window is exactly
// sliding_window keys wide; bfloat16 runs and returns float32.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/test_support.h"
#include "models/qwen3_omni/code2wav.h"
#include "models/qwen3_omni/code2wav_config.h"
#include "models/qwen3_omni/make_checkpoint.h"

namespace omnirt::models::qwen3_omni {
namespace {

class Code2WavModelTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto made = make_checkpoint(
            directory_.path(), {.preset = "tiny", .seed = 3, .dtype = DType::f32, .init_std = 0.1});
        ASSERT_TRUE(made.has_value()) << made.error().to_string();
        auto opened = checkpoint::Checkpoint::open(directory_.path());
        ASSERT_TRUE(opened.has_value()) << opened.error().to_string();
        checkpoint_ = std::move(*opened);
        auto config = code2wav_config_of(checkpoint_->config());
        ASSERT_TRUE(config.has_value()) << config.error().to_string();
        config_ = *config;
        lookup_ = [this](const std::string& name) { return checkpoint_->tensor(name); };
        auto model = Code2Wav::load(config_, lookup_);
        ASSERT_TRUE(model.has_value()) << model.error().to_string();
        model_ = std::move(*model);
    }

    at::Tensor random_codes(std::int64_t batch, std::int64_t frames, std::uint64_t seed) const {
        at::manual_seed(seed);
        return at::randint(config_.codebook_size, {batch, config_.num_quantizers, frames},
                           at::kLong);
    }

    checkpoint::testing::TempDir directory_;
    std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
    Code2WavConfig config_;
    WeightLookup lookup_;
    std::unique_ptr<Code2Wav> model_;
};

TEST_F(Code2WavModelTest, BadInputsAreInvalidArguments) {
    const at::Tensor codes = random_codes(1, 4, 1);
    auto expect_invalid = [](const Result<at::Tensor>& result, const std::string& needle) {
        ASSERT_FALSE(result.has_value()) << needle;
        EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(result.error().message.find(needle), std::string::npos) << result.error().message;
    };
    expect_invalid(model_->forward(codes.narrow(1, 0, 15)), "16 quantizers");
    expect_invalid(model_->forward(codes.narrow(2, 0, 0)), "frames >= 1");
    expect_invalid(model_->forward(codes[0]), "must be [batch >= 1");
    expect_invalid(model_->forward(at::Tensor()), "undefined");
    expect_invalid(model_->forward(codes.to(at::kFloat)), "must be integers");
    at::Tensor high = codes.clone();
    high[0][3][2] = config_.codebook_size;
    expect_invalid(model_->forward(high), "quantizer 3, frame 2 holds 2048");
    at::Tensor negative = codes.clone();
    negative[0][0][1] = -1;
    expect_invalid(model_->forward(negative), "must be in [0, 2048)");
    expect_invalid(model_->decode_chunk(codes, 4), "context_frames must be in [0, 4)");
    expect_invalid(model_->decode_chunk(codes, -1), "context_frames");
    expect_invalid(model_->chunked_decode(codes, 0, 5), "chunk_size must be >= 1");
    expect_invalid(model_->chunked_decode(codes, 8, -1), "left_context >= 0");
    expect_invalid(model_->pre_transformer(high), "holds 2048");
    // int32 codes are accepted.
    auto int32 = model_->forward(codes.to(at::kInt));
    ASSERT_TRUE(int32.has_value()) << int32.error().to_string();
    EXPECT_EQ(int32->size(2), config_.output_samples(4));
}

TEST_F(Code2WavModelTest, BadWeightsNameTheTensor) {
    const WeightLookup missing = [this](const std::string& name) -> Result<Tensor> {
        if (name == "code2wav.decoder.2.block.3.act2.beta") {
            return fail(ErrorCode::not_found, "no tensor " + name);
        }
        return checkpoint_->tensor(name);
    };
    auto model = Code2Wav::load(config_, missing);
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.error().code, ErrorCode::not_found);
    EXPECT_NE(model.error().message.find("code2wav.decoder.2.block.3.act2.beta"),
              std::string::npos);

    Code2WavConfig wider = config_;
    wider.intermediate_size *= 2;
    auto shaped = Code2Wav::load(wider, lookup_);
    ASSERT_FALSE(shaped.has_value());
    EXPECT_EQ(shaped.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(shaped.error().message.find("mlp.gate_proj.weight' has shape"), std::string::npos)
        << shaped.error().message;

    Code2WavConfig invalid = config_;
    invalid.upsample_rates.clear();
    EXPECT_FALSE(Code2Wav::load(invalid, lookup_).has_value());
}

TEST_F(Code2WavModelTest, ShorterCallIsAPrefixOfALongerOne) {
    // 300 frames: two attention query blocks, windows that slide; 100 frames: one block.
    const at::Tensor codes = random_codes(2, 300, 2);
    auto whole = model_->forward(codes);
    auto prefix = model_->forward(codes.narrow(2, 0, 100));
    ASSERT_TRUE(whole.has_value()) << whole.error().to_string();
    ASSERT_TRUE(prefix.has_value()) << prefix.error().to_string();
    ASSERT_EQ(whole->sizes(), at::IntArrayRef({2, 1, config_.output_samples(300)}));
    ASSERT_EQ(prefix->size(2), config_.output_samples(100));
    const double difference =
        (whole->narrow(2, 0, prefix->size(2)) - *prefix).abs().max().item<double>();
    EXPECT_LT(difference, 1e-5);
}

TEST_F(Code2WavModelTest, AttentionWindowIsSlidingWindowKeys) {
    // Changing frame 0 reaches, through L layers that each look sliding_window - 1 frames back,
    // exactly the frames 0 .. L * (sliding_window - 1) of the pre-transformer's output.
    const std::int64_t reach = config_.num_hidden_layers * (config_.sliding_window - 1);
    const std::int64_t frames = reach + 40;
    const at::Tensor codes = random_codes(1, frames, 4);
    at::Tensor changed = codes.clone();
    changed.narrow(2, 0, 1).copy_((codes.narrow(2, 0, 1) + 1).remainder(config_.codebook_size));
    auto a = model_->pre_transformer(codes);
    auto b = model_->pre_transformer(changed);
    ASSERT_TRUE(a.has_value()) << a.error().to_string();
    ASSERT_TRUE(b.has_value()) << b.error().to_string();
    const at::Tensor per_frame = (*a - *b).abs().amax({0, 2});  // [frames]
    EXPECT_GT(per_frame[reach].item<double>(), 1e-6) << "frame " << reach << " must still see it";
    EXPECT_EQ(per_frame.narrow(0, reach + 1, frames - reach - 1).max().item<double>(), 0.0);
}

TEST_F(Code2WavModelTest, BFloat16RunsAndReturnsFloat32) {
    auto model = Code2Wav::load(config_, lookup_, {.dtype = at::kBFloat16});
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    const at::Tensor codes = random_codes(1, 12, 5);
    auto wav = (*model)->forward(codes);
    auto reference = model_->forward(codes);
    ASSERT_TRUE(wav.has_value()) << wav.error().to_string();
    ASSERT_TRUE(reference.has_value());
    EXPECT_EQ(wav->scalar_type(), at::kFloat);
    EXPECT_EQ(wav->sizes(), reference->sizes());
    EXPECT_TRUE(at::isfinite(*wav).all().item<bool>());
    EXPECT_LT((*wav - *reference).abs().mean().item<double>(), 0.1);
    auto half = Code2Wav::load(config_, lookup_, {.dtype = at::kHalf});
    ASSERT_FALSE(half.has_value());
    EXPECT_EQ(half.error().code, ErrorCode::unimplemented);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

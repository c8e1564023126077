// S2-Pro's codec decoder (fact sheet section 7.3): exactly hop (2048) samples per frame at any
// batch; the whole decode equals an independent decode written from the fact sheet on the
// weights as stored; streaming over any split of the frames (past the 128-frame attention
// window) equals the whole decode; codes past a codebook are clamped; the directory forms of
// the codec (codec.safetensors, a "generator." prefix, the release's codec.pth in torch.save's
// layout) load and decode alike, a broken codec.pth fails naming it;
// the encoder (section 7.4) equals an independent encode and round-trips ceil(N / 2048) frames.
#include "models/s2_pro/codec_decoder.h"
#include "models/s2_pro/codec_encoder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "checkpoint/safetensors_writer.h"
#include "checkpoint/test_support.h"
#include "codec_reference.h"
#include "support/torch_save.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

using namespace testing;

// bfloat16 against float32 audio: largest difference relative to the largest sample, and the
// RMS of the difference relative to the audio's RMS.
constexpr double kBfloatMaxError = 0.1;
constexpr double kBfloatRelativeRms = 0.03;

at::Tensor random_codes(std::int64_t batch, std::int64_t frames, std::uint64_t seed) {
    at::manual_seed(seed);
    at::Tensor codes = at::randint(0, 1024, {batch, 10, frames}, at::kLong);
    codes.select(1, 0).copy_(at::randint(0, 4096, {batch, frames}, at::kLong));
    return codes;
}

class S2ProCodecTest : public ::testing::Test {
  protected:
    void SetUp() override {
        sizes_ = *codec_preset("tiny");
        weights_ = codec_reference::random_codec(sizes_, 4);
        auto decoder = CodecDecoder::create(sizes_, lookup_of(weights_));
        ASSERT_TRUE(decoder.has_value()) << decoder.error().to_string();
        decoder_ = std::move(*decoder);
    }
    CodecSizes sizes_;
    WeightMap weights_;
    std::unique_ptr<CodecDecoder> decoder_;
};

TEST_F(S2ProCodecTest, HopSamplesPerFrameAtAnyBatch) {
    EXPECT_EQ(decoder_->hop(), 2048);
    for (const auto& [batch, frames] : {std::pair{1, 1}, {1, 5}, {3, 4}}) {
        auto audio = decoder_->decode(random_codes(batch, frames, 1));
        ASSERT_TRUE(audio.has_value()) << audio.error().to_string();
        EXPECT_EQ(audio->sizes(), (at::IntArrayRef{batch, 2048 * frames}));
        EXPECT_EQ(audio->scalar_type(), at::kFloat);
        EXPECT_LE(audio->abs().max().item<float>(), 1.0f);  // tanh
        EXPECT_GT(audio->abs().max().item<float>(), 0.0f);
    }
}

TEST_F(S2ProCodecTest, WholeDecodeEqualsTheReference) {
    const at::Tensor codes = random_codes(2, 6, 2);
    auto audio = decoder_->decode(codes);
    ASSERT_TRUE(audio.has_value()) << audio.error().to_string();
    const at::Tensor expected = codec_reference::decode(weights_, sizes_, codes);
    EXPECT_TRUE(at::allclose(*audio, expected, 1e-4, 1e-5))
        << (*audio - expected).abs().max().item<float>();
}

TEST_F(S2ProCodecTest, StreamedEqualsWholeDecodePastTheAttentionWindow) {
    const std::int64_t frames = 140;  // > 128: the window's carried keys are exercised
    const at::Tensor codes = random_codes(1, frames, 3);
    auto whole = decoder_->decode(codes);
    ASSERT_TRUE(whole.has_value());
    for (const std::vector<std::int64_t>& chunks :
         {std::vector<std::int64_t>{1}, std::vector<std::int64_t>{5, 64, 7, 30}}) {
        CodecDecoder::DecodeState state = decoder_->new_state(1);
        std::vector<at::Tensor> pieces;
        std::int64_t done = 0;
        for (std::size_t i = 0; done < frames; ++i) {
            const std::int64_t n = std::min(chunks[i % chunks.size()], frames - done);
            auto piece = decoder_->decode_chunk(state, codes.narrow(2, done, n));
            ASSERT_TRUE(piece.has_value()) << piece.error().to_string();
            EXPECT_EQ(piece->size(1), 2048 * n);
            pieces.push_back(*piece);
            done += n;
        }
        const at::Tensor streamed = at::cat(pieces, 1);
        EXPECT_TRUE(at::allclose(streamed, *whole, 1e-5, 1e-5))
            << "chunks of " << chunks[0] << ": " << (streamed - *whole).abs().max().item<float>();
    }
}

// bfloat16 (the fish-speech CLI's codec precision): weights and activations rounded to 8
// significant bits through ~30 layers, so the audio is close to float32's, not equal; streaming
// stays as close (each chunk runs the same layers on the same carried windows).
TEST_F(S2ProCodecTest, BfloatDecodeIsCloseToFloat32WholeOrStreamed) {
    auto bfloat = CodecDecoder::create(sizes_, lookup_of(weights_), {.dtype = at::kBFloat16});
    ASSERT_TRUE(bfloat.has_value()) << bfloat.error().to_string();
    EXPECT_EQ((*bfloat)->dtype(), at::kBFloat16);
    const std::int64_t frames = 40;
    const at::Tensor codes = random_codes(1, frames, 6);
    auto reference = decoder_->decode(codes);
    ASSERT_TRUE(reference.has_value());
    const double scale = reference->abs().max().item<double>();
    auto expect_close = [&](const at::Tensor& audio, const std::string& what) {
        ASSERT_EQ(audio.sizes(), reference->sizes()) << what;
        EXPECT_EQ(audio.scalar_type(), at::kFloat) << what;
        const at::Tensor error = audio - *reference;
        const double max_error = error.abs().max().item<double>();
        const double relative_rms =
            (error.pow(2).mean().sqrt() / reference->pow(2).mean().sqrt()).item<double>();
        EXPECT_LT(max_error, kBfloatMaxError * scale) << what;
        EXPECT_LT(relative_rms, kBfloatRelativeRms) << what;
    };
    auto whole = (*bfloat)->decode(codes);
    ASSERT_TRUE(whole.has_value()) << whole.error().to_string();
    expect_close(*whole, "whole");
    CodecDecoder::DecodeState state = (*bfloat)->new_state(1);
    std::vector<at::Tensor> pieces;
    for (std::int64_t done = 0; done < frames;) {
        const std::int64_t n = std::min<std::int64_t>(done == 0 ? 5 : 25, frames - done);
        auto piece = (*bfloat)->decode_chunk(state, codes.narrow(2, done, n));
        ASSERT_TRUE(piece.has_value()) << piece.error().to_string();
        pieces.push_back(*piece);
        done += n;
    }
    expect_close(at::cat(pieces, 1), "streamed in chunks of 5, 25, 10");
    EXPECT_FALSE(
        CodecDecoder::create(sizes_, lookup_of(weights_), {.dtype = at::kHalf}).has_value());
}

TEST_F(S2ProCodecTest, CodesPastTheirCodebookAreClampedAndBadShapesRefused) {
    at::Tensor codes = random_codes(1, 3, 5);
    at::Tensor big = codes.clone();
    big[0][0][1] = 5000;  // semantic codebook: 4096 entries
    big[0][4][2] = 4000;  // residual codebooks: 1024
    at::Tensor clamped = codes.clone();
    clamped[0][0][1] = 4095;
    clamped[0][4][2] = 1023;
    auto a = decoder_->decode(big);
    auto b = decoder_->decode(clamped);
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_TRUE(at::equal(*a, *b));
    EXPECT_FALSE(decoder_->decode(at::zeros({1, 9, 3}, at::kLong)).has_value());
    EXPECT_FALSE(decoder_->decode(at::zeros({1, 10, 3}, at::kFloat)).has_value());
    CodecDecoder::DecodeState state = decoder_->new_state(2);
    EXPECT_FALSE(decoder_->decode_chunk(state, at::zeros({1, 10, 3}, at::kLong)).has_value());
}

TEST_F(S2ProCodecTest, OpensCodecSafetensorsWithOrWithoutTheGeneratorPrefix) {
    checkpoint::testing::TempDir dir;
    for (const std::string prefix : {"", "generator."}) {
        const auto where = dir / (prefix.empty() ? "plain" : "prefixed");
        std::filesystem::create_directories(where);
        std::vector<std::pair<std::string, Tensor>> tensors;
        for (const auto& [name, value] : weights_) {
            tensors.emplace_back(prefix + name, *torch_bridge::from_torch(value));
        }
        ASSERT_TRUE(
            checkpoint::write_safetensors(where / std::string(kCodecFile), tensors).has_value());
        auto opened = CodecDecoder::open(where);
        ASSERT_TRUE(opened.has_value()) << opened.error().to_string();
        EXPECT_EQ((*opened)->sizes().decoder_dim, sizes_.decoder_dim);
        const at::Tensor codes = random_codes(1, 2, 6);
        EXPECT_TRUE(at::equal(*(*opened)->decode(codes), *decoder_->decode(codes)));
    }
    // The release's form: codec.pth in torch.save's layout, read as it is.
    const auto pickle = dir / "pickle";
    std::filesystem::create_directories(pickle);
    std::vector<std::pair<std::string, Tensor>> state;
    for (const auto& [name, value] : weights_) {
        state.emplace_back("generator." + name, *torch_bridge::from_torch(value.contiguous()));
    }
    omnirt::testing::write_torch_save(pickle / std::string(kCodecPickleFile), state);
    auto from_pickle = CodecDecoder::open(pickle);
    ASSERT_TRUE(from_pickle.has_value()) << from_pickle.error().to_string();
    const at::Tensor codes = random_codes(2, 3, 8);
    EXPECT_TRUE(at::equal(*(*from_pickle)->decode(codes), *decoder_->decode(codes)));
    auto encoder = CodecEncoder::open(pickle);
    ASSERT_TRUE(encoder.has_value()) << encoder.error().to_string();
    const auto broken_pickle = dir / "broken_pickle";
    std::filesystem::create_directories(broken_pickle);
    checkpoint::testing::write_text(broken_pickle / std::string(kCodecPickleFile), "not a zip");
    auto refused = CodecDecoder::open(broken_pickle);
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(refused.error().message.find("codec.pth"), std::string::npos);
    auto none = CodecDecoder::open(dir / "nowhere");
    ASSERT_FALSE(none.has_value());
    EXPECT_EQ(none.error().code, ErrorCode::not_found);

    WeightMap broken = weights_;
    broken.erase("decoder.model.3.block.4.block.3.conv.bias");
    auto missing = CodecDecoder::create(sizes_, lookup_of(broken));
    ASSERT_FALSE(missing.has_value());
    EXPECT_NE(missing.error().message.find("decoder.model.3.block.4.block.3.conv.bias"),
              std::string::npos)
        << missing.error().message;
}

TEST_F(S2ProCodecTest, EncoderMatchesTheReferenceAndRoundTripsShapes) {
    auto encoder = CodecEncoder::create(sizes_, lookup_of(weights_));
    ASSERT_TRUE(encoder.has_value()) << encoder.error().to_string();
    at::manual_seed(8);
    for (const std::int64_t samples : {1, 2048, 5000, 2048 * 3}) {
        const at::Tensor audio = 0.3 * at::randn({2, samples}, at::kFloat);
        auto codes = (*encoder)->encode(audio);
        ASSERT_TRUE(codes.has_value()) << codes.error().to_string();
        const std::int64_t frames = (samples + 2047) / 2048;
        EXPECT_EQ(codes->sizes(), (at::IntArrayRef{2, 10, frames})) << samples;
        EXPECT_EQ(codes->scalar_type(), at::kLong);
        EXPECT_LT(codes->select(1, 0).max().item<std::int64_t>(), 4096);
        EXPECT_LT(codes->narrow(1, 1, 9).max().item<std::int64_t>(), 1024);
        EXPECT_GE(codes->min().item<std::int64_t>(), 0);
        const at::Tensor expected = codec_reference::encode(weights_, sizes_, audio);
        // Nearest-codebook choices may flip on a near-tie where float kernels differ (another
        // CPU); all but a few must agree (a wrong stage would disagree on about all of its).
        const double agree = codes->eq(expected).to(at::kDouble).mean().item<double>();
        EXPECT_GE(agree, 0.95) << samples << " samples";
        auto audio_back = decoder_->decode(*codes);
        ASSERT_TRUE(audio_back.has_value());
        EXPECT_EQ(audio_back->sizes(), (at::IntArrayRef{2, 2048 * frames}));
    }
    // A clip alone encodes as in a batch; [N] is one clip.
    const at::Tensor clip = 0.3 * at::randn({3000}, at::kFloat);
    auto alone = (*encoder)->encode(clip);
    auto batched = (*encoder)->encode(at::stack({clip, 0.3 * at::randn({3000})}));
    ASSERT_TRUE(alone.has_value() && batched.has_value());
    EXPECT_TRUE(at::equal(alone->select(0, 0), batched->select(0, 0)));

    EXPECT_FALSE((*encoder)->encode(at::zeros({1, 0})).has_value());
    EXPECT_FALSE((*encoder)->encode(at::zeros({1, 1, 10})).has_value());
    EXPECT_FALSE((*encoder)->encode(at::zeros({4}, at::kLong)).has_value());
    auto nan = (*encoder)->encode(at::full({1, 10}, NAN));
    ASSERT_FALSE(nan.has_value());
    EXPECT_EQ(nan.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace omnirt::models::s2_pro

// The Qwen3-Omni audio encoder against an independent per-audio forward written from
// transformers' math (each chunk convolved alone, unpadded; attention with an explicit window
// mask), plus the invariants the batched forward must keep: output lengths, batch == alone,
// windows that do not see each other, bfloat16, loading from a safetensors checkpoint, errors.
#include "models/qwen3_omni/audio_encoder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors_writer.h"
#include "models_omni/encoder_test_support.h"

namespace omnirt::models::qwen3_omni {
namespace {

using testing::audio_weights;
using testing::expect_close;
using testing::lookup_of;
using testing::max_difference;
using testing::tiny_audio_config;
using testing::WeightMap;

// transformers' integer form of the length formula.
std::int64_t transformers_length(std::int64_t frames) {
    auto floor_div = [](std::int64_t a, std::int64_t b) {
        return a >= 0 ? a / b : -((-a + b - 1) / b);
    };
    const std::int64_t leave = frames % 100;
    const std::int64_t features = floor_div(leave - 1, 2) + 1;
    return floor_div(floor_div(features - 1, 2) + 1 - 1, 2) + 1 + (frames / 100) * 13;
}

// Row p of the sinusoid table in float64: [sin(p * inv_i), cos(p * inv_i)].
double sinusoid(std::int64_t p, std::int64_t channel, std::int64_t channels) {
    const std::int64_t half = channels / 2;
    const std::int64_t i = channel % half;
    const double inverse = std::exp(-static_cast<double>(i) * std::log(10000.0) / (half - 1));
    return channel < half ? std::sin(p * inverse) : std::cos(p * inverse);
}

at::Tensor reference_linear(const WeightMap& w, const std::string& name, const at::Tensor& x) {
    at::Tensor y = at::matmul(x, w.at(name + ".weight").t());
    if (w.count(name + ".bias")) y = y + w.at(name + ".bias");
    return y;
}

at::Tensor reference_norm(const WeightMap& w, const std::string& name, const at::Tensor& x) {
    const at::Tensor mean = x.mean(-1, true);
    const at::Tensor variance = (x - mean).pow(2).mean(-1, true);
    return (x - mean) / at::sqrt(variance + 1e-5) * w.at(name + ".weight") + w.at(name + ".bias");
}

// Each chunk is zero-padded to `padded_frames` (100, or 0: not padded) before the convolutions,
// and only its valid rows are kept.
at::Tensor reference_audio(const AudioEncoderConfig& config, const WeightMap& w,
                           const at::Tensor& mel, std::int64_t padded_frames = 100) {
    const std::string p(kAudioEncoderPrefix);
    std::vector<at::Tensor> chunks;
    for (std::int64_t offset = 0; offset < mel.size(1); offset += 100) {
        const std::int64_t frames = std::min<std::int64_t>(100, mel.size(1) - offset);
        const std::int64_t width = std::max(frames, padded_frames);
        at::Tensor x = at::zeros({1, 1, mel.size(0), width});
        x[0][0].narrow(1, 0, frames).copy_(mel.narrow(1, offset, frames));
        for (const char* conv : {"conv2d1", "conv2d2", "conv2d3"}) {
            x = at::gelu(at::conv2d(x, w.at(p + conv + ".weight"), w.at(p + conv + ".bias"), 2, 1));
        }
        // Valid rows: three stride-2 halvings of the chunk's frames, rounded up.
        auto half_up = [](std::int64_t n) { return (n + 1) / 2; };
        const std::int64_t time = half_up(half_up(half_up(frames)));
        x = x.narrow(3, 0, time);
        x = reference_linear(w, p + "conv_out", x[0].permute({2, 0, 1}).reshape({time, -1}));
        at::Tensor positions = at::empty({time, config.d_model}, at::kDouble);
        for (std::int64_t row = 0; row < time; ++row) {
            for (std::int64_t c = 0; c < config.d_model; ++c) {
                positions[row][c] = sinusoid(row, c, config.d_model);
            }
        }
        chunks.push_back(x + positions.to(at::kFloat));
    }
    at::Tensor x = at::cat(chunks);
    const std::int64_t n = x.size(0);
    const at::Tensor window = at::arange(n, at::kLong).div(104, "floor");
    const at::Tensor blocked = window.unsqueeze(1) != window.unsqueeze(0);
    const std::int64_t heads = config.encoder_attention_heads;
    const std::int64_t d = config.head_dim();
    for (std::int64_t i = 0; i < config.encoder_layers; ++i) {
        const std::string layer = p + "layers." + std::to_string(i) + ".";
        const at::Tensor h = reference_norm(w, layer + "self_attn_layer_norm", x);
        auto heads_of = [&](const char* proj) {
            return reference_linear(w, layer + "self_attn." + proj, h)
                .view({n, heads, d})
                .transpose(0, 1);
        };
        at::Tensor scores = at::matmul(heads_of("q_proj"), heads_of("k_proj").transpose(1, 2)) /
                            std::sqrt(static_cast<double>(d));
        scores = scores.masked_fill(blocked, -INFINITY).softmax(-1);
        const at::Tensor attended = at::matmul(scores, heads_of("v_proj")).transpose(0, 1);
        x = x + reference_linear(w, layer + "self_attn.out_proj", attended.reshape({n, -1}));
        const at::Tensor g = reference_norm(w, layer + "final_layer_norm", x);
        x = x + reference_linear(w, layer + "fc2", at::gelu(reference_linear(w, layer + "fc1", g)));
    }
    x = reference_linear(w, p + "proj1", reference_norm(w, p + "ln_post", x));
    return reference_linear(w, p + "proj2", at::gelu(x));
}

std::unique_ptr<AudioEncoder> make_encoder(const AudioEncoderConfig& config, const WeightMap& w,
                                           at::ScalarType dtype = at::kFloat) {
    auto encoder = AudioEncoder::load(config, lookup_of(w), {.dtype = dtype});
    OMNI_CHECK(encoder.has_value(), encoder.has_value() ? "" : encoder.error().to_string());
    return std::move(*encoder);
}

at::Tensor random_mel(std::int64_t frames, std::uint64_t seed) {
    at::manual_seed(seed);
    return at::randn({128, frames});
}

TEST(AudioOutputLength, MatchesTransformersFormula) {
    EXPECT_EQ(audio_output_length(0), 0);
    for (std::int64_t frames = 1; frames <= 5000; ++frames) {
        ASSERT_EQ(audio_output_length(frames), transformers_length(frames)) << frames;
    }
    EXPECT_EQ(audio_output_length(1), 1);
    EXPECT_EQ(audio_output_length(99), 13);
    EXPECT_EQ(audio_output_length(100), 13);
    EXPECT_EQ(audio_output_length(101), 14);
    EXPECT_EQ(audio_output_length(250), 33);
    EXPECT_EQ(audio_output_length(1000), 130);
    EXPECT_EQ(audio_output_length(3001), 391);
    static_assert(audio_output_length(30000) == 3900);  // usable at compile time
}

TEST(AudioEncoder, SinusoidTableMatchesTheFormula) {
    const at::Tensor table = audio_sinusoid_table(1500, 1280);
    ASSERT_EQ(table.sizes(), (at::IntArrayRef{1500, 1280}));
    EXPECT_EQ(table.scalar_type(), at::kFloat);
    for (std::int64_t p : {0, 1, 12, 777, 1499}) {
        for (std::int64_t c : {0, 1, 639, 640, 641, 1279}) {
            // float32 angles up to 1499 rad carry ~1e-4 of rounding.
            EXPECT_NEAR(table[p][c].item<double>(), sinusoid(p, c, 1280), 2e-4) << p << "," << c;
        }
    }
    // Row 0: sin 0 = 0, cos 0 = 1.
    EXPECT_EQ(table[0].narrow(0, 0, 640).abs().max().item<float>(), 0.0f);
    EXPECT_EQ(table[0].narrow(0, 640, 640).min().item<float>(), 1.0f);
}

TEST(AudioEncoder, MatchesReferenceForward) {
    const AudioEncoderConfig config = tiny_audio_config();
    const WeightMap w = audio_weights(config, 3);
    const auto encoder = make_encoder(config, w);
    for (std::int64_t frames : {1, 2, 99, 100, 101, 250, 1000, 1234}) {
        const at::Tensor mel = random_mel(frames, static_cast<std::uint64_t>(frames));
        auto out = encoder->forward({mel});
        ASSERT_TRUE(out.has_value()) << out.error().to_string();
        ASSERT_EQ(out->size(), 1u);
        const at::Tensor expected = reference_audio(config, w, mel);
        ASSERT_EQ(expected.size(0), audio_output_length(frames));
        expect_close((*out)[0], expected, 1e-4);
    }
}

TEST(AudioEncoder, LongestInBatchPaddingIsTransformersPadding) {
    const AudioEncoderConfig config = tiny_audio_config();
    const WeightMap w = audio_weights(config, 12);
    auto loaded = AudioEncoder::load(config, lookup_of(w),
                                     {.chunk_padding = AudioChunkPadding::longest_in_batch});
    ASSERT_TRUE(loaded.has_value());
    const AudioEncoder& encoder = **loaded;
    const at::Tensor short_mel = random_mel(37, 1);
    const at::Tensor long_mel = random_mel(101, 2);
    // Alone, a 37-frame audio is not padded; next to a 101-frame one, its chunk is padded to 100.
    auto alone = encoder.forward({short_mel});
    auto batch = encoder.forward({short_mel, long_mel});
    ASSERT_TRUE(alone.has_value() && batch.has_value());
    expect_close((*alone)[0], reference_audio(config, w, short_mel, 0), 1e-4);
    expect_close((*batch)[0], reference_audio(config, w, short_mel, 100), 1e-4);
    expect_close((*batch)[1], reference_audio(config, w, long_mel, 100), 1e-4);
    // The padding matters for a short chunk's tail (why full_chunk is the default).
    EXPECT_GT(max_difference((*alone)[0], (*batch)[0]), 1e-4);
}

TEST(AudioEncoder, OutputLengthsFollowTheFormula) {
    const AudioEncoderConfig config = tiny_audio_config();
    const WeightMap w = audio_weights(config, 4);
    const auto encoder = make_encoder(config, w);
    std::vector<at::Tensor> mels;
    const std::vector<std::int64_t> lengths = {1, 99, 100, 101, 250, 1000, 3001, 7, 200, 1599};
    for (std::int64_t frames : lengths) mels.push_back(random_mel(frames, 9));
    auto out = encoder->forward(mels);
    ASSERT_TRUE(out.has_value()) << out.error().to_string();
    ASSERT_EQ(out->size(), lengths.size());
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        EXPECT_EQ((*out)[i].sizes(), (at::IntArrayRef{audio_output_length(lengths[i]), 24}));
        EXPECT_EQ((*out)[i].scalar_type(), at::kFloat);
    }
}

TEST(AudioEncoder, BatchEqualsEachAudioAlone) {
    const AudioEncoderConfig config = tiny_audio_config();
    const WeightMap w = audio_weights(config, 5);
    const auto encoder = make_encoder(config, w);
    std::vector<at::Tensor> mels;
    for (std::int64_t frames : {250, 1000, 37, 3001, 100, 1}) {
        mels.push_back(random_mel(frames, static_cast<std::uint64_t>(frames) + 100));
    }
    auto batch = encoder->forward(mels);
    ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
    for (std::size_t i = 0; i < mels.size(); ++i) {
        auto alone = encoder->forward({mels[i]});
        ASSERT_TRUE(alone.has_value());
        expect_close((*batch)[i], (*alone)[0], 1e-5);
    }
}

TEST(AudioEncoder, WindowsDoNotAttendToEachOther) {
    const AudioEncoderConfig config = tiny_audio_config();
    ASSERT_EQ(config.window_tokens(), 104);
    const WeightMap w = audio_weights(config, 6);
    const auto encoder = make_encoder(config, w);
    // 2000 frames: 260 tokens in windows [0, 104), [104, 208), [208, 260). Frames 800-1599 make
    // exactly the tokens of the second window.
    const at::Tensor mel = random_mel(2000, 11);
    at::Tensor changed = mel.clone();
    changed.narrow(1, 800, 800).add_(at::randn({128, 800}));
    auto before = encoder->forward({mel});
    auto after = encoder->forward({changed});
    ASSERT_TRUE(before.has_value() && after.has_value());
    const at::Tensor& a = (*before)[0];
    const at::Tensor& b = (*after)[0];
    ASSERT_EQ(a.size(0), 260);
    expect_close(b.narrow(0, 0, 104), a.narrow(0, 0, 104), 1e-6);
    expect_close(b.narrow(0, 208, 52), a.narrow(0, 208, 52), 1e-6);
    EXPECT_GT(max_difference(b.narrow(0, 104, 104), a.narrow(0, 104, 104)), 1e-2);
}

TEST(AudioEncoder, Bfloat16FollowsFloat32) {
    const AudioEncoderConfig config = tiny_audio_config();
    const WeightMap w = audio_weights(config, 7);
    const auto full = make_encoder(config, w);
    const auto half = make_encoder(config, w, at::kBFloat16);
    EXPECT_EQ(half->dtype(), at::kBFloat16);
    const std::vector<at::Tensor> mels = {random_mel(345, 1), random_mel(60, 2)};
    auto expected = full->forward(mels);
    auto actual = half->forward(mels);
    ASSERT_TRUE(expected.has_value() && actual.has_value());
    for (std::size_t i = 0; i < mels.size(); ++i) {
        EXPECT_EQ((*actual)[i].scalar_type(), at::kBFloat16);
        const double scale = (*expected)[i].abs().max().item<double>();
        EXPECT_LE(max_difference((*actual)[i], (*expected)[i]), 0.05 * scale + 0.02);
    }
}

TEST(AudioEncoder, LoadsABfloat16SafetensorsCheckpoint) {
    const AudioEncoderConfig config = tiny_audio_config();
    const WeightMap w = audio_weights(config, 8);
    const std::filesystem::path directory =
        std::filesystem::temp_directory_path() /
        ("omnirt_audio_encoder_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory);
    std::vector<std::pair<std::string, Tensor>> tensors;
    WeightMap rounded;  // what the checkpoint holds, back in float32
    for (const auto& [name, value] : w) {
        const at::Tensor stored = value.to(at::kBFloat16).contiguous();
        rounded[name] = stored.to(at::kFloat);
        auto tensor = torch_bridge::from_torch(stored);
        ASSERT_TRUE(tensor.has_value());
        tensors.emplace_back(name, *tensor);
    }
    ASSERT_TRUE(checkpoint::write_safetensors(directory / "model.safetensors", tensors));
    nlohmann::json json = {{"model_type", "qwen3_omni_moe"},
                           {"thinker_config", {{"audio_config", to_json(config)}}}};
    std::ofstream(directory / "config.json") << json.dump(2);

    auto opened = checkpoint::Checkpoint::open(directory);
    ASSERT_TRUE(opened.has_value()) << opened.error().to_string();
    auto parsed = audio_encoder_config_of((*opened)->config());
    ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
    const checkpoint::Checkpoint& source = **opened;
    auto encoder =
        AudioEncoder::load(*parsed, [&](const std::string& name) { return source.tensor(name); });
    ASSERT_TRUE(encoder.has_value()) << encoder.error().to_string();
    const at::Tensor mel = random_mel(321, 5);
    auto out = (*encoder)->forward({mel});
    ASSERT_TRUE(out.has_value());
    expect_close((*out)[0], reference_audio(config, rounded, mel), 1e-4);
    std::filesystem::remove_all(directory);
}

TEST(AudioEncoder, WeightErrorsNameTheTensor) {
    const AudioEncoderConfig config = tiny_audio_config();
    WeightMap w = audio_weights(config, 9);
    w.erase("thinker.audio_tower.layers.1.self_attn.k_proj.bias");
    auto missing = AudioEncoder::load(config, lookup_of(w));
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_NE(missing.error().message.find("layers.1.self_attn.k_proj.bias"), std::string::npos);

    w = audio_weights(config, 9);
    w["thinker.audio_tower.conv_out.weight"] = at::zeros({32, 100});
    auto wrong = AudioEncoder::load(config, lookup_of(w));
    ASSERT_FALSE(wrong.has_value());
    EXPECT_EQ(wrong.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(wrong.error().message.find("conv_out.weight"), std::string::npos);
    EXPECT_NE(wrong.error().message.find("[32, 128]"), std::string::npos);

    w = audio_weights(config, 9);
    w["thinker.audio_tower.ln_post.bias"] = at::zeros({32}, at::kLong);
    auto integer = AudioEncoder::load(config, lookup_of(w));
    ASSERT_FALSE(integer.has_value());
    EXPECT_NE(integer.error().message.find("non-floating"), std::string::npos);

    w = audio_weights(config, 9);
    auto half = AudioEncoder::load(config, lookup_of(w), {.dtype = at::kHalf});
    ASSERT_FALSE(half.has_value());
    EXPECT_EQ(half.error().code, ErrorCode::unimplemented);

    AudioEncoderConfig bad = config;
    bad.encoder_attention_heads = 5;
    auto invalid = AudioEncoder::load(bad, lookup_of(w));
    ASSERT_FALSE(invalid.has_value());
    EXPECT_EQ(invalid.error().code, ErrorCode::invalid_argument);
}

TEST(AudioEncoder, InputErrorsNameTheAudio) {
    const AudioEncoderConfig config = tiny_audio_config();
    const WeightMap w = audio_weights(config, 10);
    const auto encoder = make_encoder(config, w);
    EXPECT_FALSE(encoder->forward({}).has_value());
    for (const at::Tensor& bad :
         {at::zeros({80, 10}), at::zeros({128, 0}), at::zeros({128}), at::zeros({1, 128, 10}),
          at::zeros({128, 10}, at::kLong), at::Tensor()}) {
        auto out = encoder->forward({random_mel(10, 1), bad});
        ASSERT_FALSE(out.has_value());
        EXPECT_EQ(out.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(out.error().message.find("audio 1"), std::string::npos) << out.error().message;
    }
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

// Qwen3-Omni code2wav on the tiny checkpoint the transformers goldens were made from
// (tests/goldens/hf/README.md): transformers' `model.code2wav(codes)` on 23 frames, its
// `chunked_decode(codes, chunk_size=8, left_context_size=5)`, and the codes and waveform of an
// end-to-end `generate` (which decodes with chunked_decode(300, 25), one chunk for 9 frames).
// Weights in float32; the tiny config keeps the released ratios ([2, 2], [8, 5, 4, 3]).
#include <cmath>

#include "models/qwen3_omni/code2wav.h"
#include "models/qwen3_omni/code2wav_config.h"
#include "models_omni_golden/golden_support.h"

namespace omnirt::models::qwen3_omni {
namespace {

// Largest absolute difference transformers and omnirt reached in float32 is printed by every
// test; the bound leaves room for other CPUs' kernels.
constexpr double kTolerance = 1e-4;

double max_diff(const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kFloat).flatten() - b.to(at::kFloat).flatten()).abs().max().item<double>();
}

struct Loaded {
    std::unique_ptr<Tiny> tiny;
    Code2WavConfig config;
    std::unique_ptr<Code2Wav> model;
};

std::unique_ptr<Loaded> load_tiny() {
    auto loaded = std::make_unique<Loaded>();
    loaded->tiny = make_tiny();
    auto config = code2wav_config_of(loaded->tiny->checkpoint->config());
    OMNI_CHECK(config.has_value(), config.has_value() ? "" : config.error().to_string().c_str());
    loaded->config = *config;
    auto model = Code2Wav::load(*config, lookup_of(*loaded->tiny->checkpoint));
    OMNI_CHECK(model.has_value(), model.has_value() ? "" : model.error().to_string().c_str());
    loaded->model = std::move(*model);
    return loaded;
}

TEST(OmniCode2WavGoldenTest, WholeDecodeMatchesTransformers) {
    auto golden = Golden::open();
    if (!golden || !golden->has("code2wav.whole")) GTEST_SKIP() << "no code2wav goldens";
    auto loaded = load_tiny();
    const at::Tensor codes = golden->get("code2wav.codes").unsqueeze(0);  // [1, 16, 23]
    const at::Tensor expected = golden->get("code2wav.whole");
    const std::int64_t frames = codes.size(2);
    ASSERT_EQ(loaded->config.total_upsample(), 1920);
    EXPECT_EQ(loaded->config.output_samples(frames), 1920 * frames - 555);
    ASSERT_EQ(expected.numel(), loaded->config.output_samples(frames));

    auto wav = loaded->model->forward(codes);
    ASSERT_TRUE(wav.has_value()) << wav.error().to_string();
    ASSERT_EQ(wav->sizes(), at::IntArrayRef({1, 1, expected.numel()}));
    EXPECT_EQ(wav->scalar_type(), at::kFloat);
    const double difference = max_diff(*wav, expected);
    std::printf("code2wav whole (23 frames): max |omnirt - transformers| = %.3g\n", difference);
    EXPECT_LT(difference, kTolerance);
}

TEST(OmniCode2WavGoldenTest, ChunkedDecodeMatchesTransformers) {
    auto golden = Golden::open();
    if (!golden || !golden->has("code2wav.chunked_8_5")) GTEST_SKIP() << "no code2wav goldens";
    auto loaded = load_tiny();
    const at::Tensor codes = golden->get("code2wav.codes").unsqueeze(0);
    const at::Tensor expected = golden->get("code2wav.chunked_8_5");
    const std::int64_t frames = codes.size(2);
    const std::int64_t chunks = (frames + 7) / 8;
    EXPECT_EQ(chunked_output_samples(loaded->config, frames, 8, 5), 1920 * frames - 555 * chunks);
    ASSERT_EQ(expected.numel(), chunked_output_samples(loaded->config, frames, 8, 5));

    auto wav = loaded->model->chunked_decode(codes, 8, 5);
    ASSERT_TRUE(wav.has_value()) << wav.error().to_string();
    ASSERT_EQ(wav->sizes(), at::IntArrayRef({1, 1, expected.numel()}));
    const double difference = max_diff(*wav, expected);
    std::printf("code2wav chunked (chunk 8, context 5): max difference = %.3g\n", difference);
    EXPECT_LT(difference, kTolerance);

    // The same chunks through decode_chunk, as a streaming caller would issue them.
    std::vector<at::Tensor> pieces;
    for (const Code2WavChunk& chunk : code2wav_chunks(frames, 8, 5)) {
        auto piece = loaded->model->decode_chunk(
            codes.narrow(2, chunk.first_frame(), chunk.frames()), chunk.context);
        ASSERT_TRUE(piece.has_value()) << piece.error().to_string();
        EXPECT_EQ(piece->size(2), chunk_output_samples(loaded->config, chunk));
        pieces.push_back(*piece);
    }
    EXPECT_TRUE(at::equal(at::cat(pieces, 2), *wav));
}

TEST(OmniCode2WavGoldenTest, GenerateWaveformMatchesTransformers) {
    auto golden = Golden::open();
    if (!golden || !golden->has("generate.code2wav_wav.0")) GTEST_SKIP() << "no generate golden";
    auto loaded = load_tiny();
    const at::Tensor codes = golden->get("generate.code2wav_codes.0");  // [1, 16, 9]
    const at::Tensor expected = golden->get("generate.code2wav_wav.0");
    ASSERT_EQ(expected.numel(), chunked_output_samples(loaded->config, codes.size(2), 300, 25));
    auto wav = loaded->model->chunked_decode(codes);  // transformers' generate defaults
    ASSERT_TRUE(wav.has_value()) << wav.error().to_string();
    const double difference = max_diff(*wav, expected);
    std::printf("code2wav generate (9 frames): max difference = %.3g\n", difference);
    EXPECT_LT(difference, kTolerance);
}

TEST(OmniCode2WavGoldenTest, BatchEqualsEachAlone) {
    auto golden = Golden::open();
    if (!golden || !golden->has("code2wav.codes")) GTEST_SKIP() << "no code2wav goldens";
    auto loaded = load_tiny();
    const at::Tensor first = golden->get("code2wav.codes").unsqueeze(0);
    const at::Tensor second = first.flip({2});  // other codes, same length
    const at::Tensor third = (first * 7 + 3).remainder(loaded->config.codebook_size);
    auto batch = loaded->model->forward(at::cat({first, second, third}));
    ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
    double worst = 0.0;
    std::int64_t index = 0;
    for (const at::Tensor& codes : {first, second, third}) {
        auto alone = loaded->model->forward(codes);
        ASSERT_TRUE(alone.has_value()) << alone.error().to_string();
        worst = std::max(worst, max_diff((*batch)[index++], (*alone)[0]));
    }
    std::printf("code2wav batch of 3 vs each alone: max difference = %.3g\n", worst);
    EXPECT_LT(worst, 1e-5);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

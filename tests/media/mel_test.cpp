#include "media/mel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>

#include "media/golden_file.h"
#include "media/test_audio.h"

namespace omnirt::media {
namespace {

// A direct double-precision rendering of the recipe in mel.h: O(n^2) DFT per frame.
std::vector<double> reference_log_mel(const std::vector<float>& x) {
    const auto n = static_cast<std::int64_t>(x.size());
    const std::int64_t frames = n / 160;
    const std::vector<double>& filters = whisper_mel_filters();
    std::vector<double> out(static_cast<std::size_t>(128 * frames));
    auto at = [&](std::int64_t i) {
        i -= 200;
        if (i < 0) i = -i;
        if (i >= n) i = 2 * (n - 1) - i;
        return static_cast<double>(x[static_cast<std::size_t>(i)]);
    };
    double max_value = -1e30;
    for (std::int64_t t = 0; t < frames; ++t) {
        std::vector<double> power(201);
        for (int k = 0; k < 201; ++k) {
            double re = 0, im = 0;
            for (int j = 0; j < 400; ++j) {
                const double w = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * j / 400);
                const double v = at(t * 160 + j) * w;
                re += v * std::cos(2 * std::numbers::pi * k * j / 400);
                im -= v * std::sin(2 * std::numbers::pi * k * j / 400);
            }
            power[k] = re * re + im * im;
        }
        for (int m = 0; m < 128; ++m) {
            double sum = 0;
            for (int k = 0; k < 201; ++k) sum += filters[m * 201 + k] * power[k];
            const double value = std::log10(std::max(sum, 1e-10));
            out[m * frames + t] = value;
            max_value = std::max(max_value, value);
        }
    }
    for (double& v : out) v = (std::max(v, max_value - 8.0) + 4.0) / 4.0;
    return out;
}

TEST(WhisperLogMel, MatchesDirectDftReference) {
    std::mt19937 random(7);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    std::vector<float> x(4321);
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = normal(random) + 0.3f * static_cast<float>(std::sin(0.05 * static_cast<double>(i)));
    }
    auto mel = whisper_log_mel(x);
    ASSERT_TRUE(mel.has_value()) << mel.error().to_string();
    ASSERT_EQ(mel->frames, 4321 / 160);
    ASSERT_EQ(mel->mel_bins, 128);
    const std::vector<double> expected = reference_log_mel(x);
    ASSERT_EQ(mel->values.size(), expected.size());
    double worst = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        worst = std::max(worst, std::abs(expected[i] - mel->values[i]));
    }
    EXPECT_LT(worst, 2e-5);
}

TEST(WhisperLogMel, MelFiltersAreSlaneyNormalisedTriangles) {
    const std::vector<double>& filters = whisper_mel_filters();
    ASSERT_EQ(filters.size(), 128u * 201u);
    for (int m = 0; m < 128; ++m) {
        double peak = 0;
        for (int k = 0; k < 201; ++k) {
            EXPECT_GE(filters[m * 201 + k], 0.0);
            peak = std::max(peak, filters[m * 201 + k]);
        }
        EXPECT_GT(peak, 0.0) << "filter " << m << " is empty";
    }
}

// Goldens from transformers.js' WhisperFeatureExtractor (tests/media/goldens/generate_mel.mjs).
TEST(WhisperLogMel, MatchesTransformersJsGoldens) {
    testing::GoldenReader reader(testing::read_file_bytes(testing::golden_path("mel_golden.bin")));
    ASSERT_EQ(reader.text(8), "OMNIMEL1");
    const std::uint32_t cases = reader.u32();
    ASSERT_GE(cases, 4u);
    for (std::uint32_t c = 0; c < cases; ++c) {
        const std::string name = reader.text(reader.u32());
        const std::uint32_t samples = reader.u32();
        const std::uint32_t frames = reader.u32();
        const std::vector<float> input = reader.array<float>(samples);
        const std::vector<float> expected = reader.array<float>(std::size_t{128} * frames);
        ASSERT_TRUE(reader.ok()) << "truncated golden file at case " << name;
        auto mel = whisper_log_mel(input);
        ASSERT_TRUE(mel.has_value()) << name << ": " << mel.error().to_string();
        ASSERT_EQ(mel->frames, frames) << name;
        float worst = 0;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            worst = std::max(worst, std::abs(expected[i] - mel->values[i]));
        }
        EXPECT_LE(worst, 1e-4f) << name;
    }
    EXPECT_TRUE(reader.at_end());
}

TEST(WhisperLogMel, FrameCountIsSamplesOverHop) {
    for (std::size_t n : {160u, 161u, 319u, 320u, 401u, 16000u, 16159u}) {
        std::vector<float> x(n, 0.1f);
        auto mel = whisper_log_mel(x);
        ASSERT_TRUE(mel.has_value()) << n;
        EXPECT_EQ(mel->frames, static_cast<std::int64_t>(n / 160)) << n;
        EXPECT_EQ(mel->values.size(), 128 * (n / 160));
        for (float v : mel->values) EXPECT_TRUE(std::isfinite(v));
    }
}

TEST(WhisperLogMel, SilenceIsFlat) {
    std::vector<float> x(1600, 0.0f);
    auto mel = whisper_log_mel(x);
    ASSERT_TRUE(mel.has_value());
    for (float v : mel->values) EXPECT_FLOAT_EQ(v, (-10.0f + 4.0f) / 4.0f);
}

TEST(WhisperLogMel, HostileInputsFailClearly) {
    auto empty = whisper_log_mel({});
    ASSERT_FALSE(empty.has_value());
    EXPECT_EQ(empty.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(empty.error().message.find("at least 160"), std::string::npos);

    std::vector<float> short_audio(159, 0.5f);
    EXPECT_FALSE(whisper_log_mel(short_audio).has_value());

    std::vector<float> with_nan(1000, 0.1f);
    with_nan[517] = std::numeric_limits<float>::quiet_NaN();
    auto nan = whisper_log_mel(with_nan);
    ASSERT_FALSE(nan.has_value());
    EXPECT_EQ(nan.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(nan.error().message.find("sample 517"), std::string::npos);

    std::vector<float> with_inf(1000, 0.1f);
    with_inf[0] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(whisper_log_mel(with_inf).has_value());

    std::vector<float> long_audio(2000, 0.1f);
    auto too_long = whisper_log_mel(long_audio, {.max_samples = 1999});
    ASSERT_FALSE(too_long.has_value());
    EXPECT_EQ(too_long.error().code, ErrorCode::out_of_range);
}

TEST(WhisperLogMel, InputIsMonoAt16k) {
    AudioBuffer stereo = testing::sine(48000, 0.5, 440.0, 2);
    auto input = to_whisper_input(stereo);
    ASSERT_TRUE(input.has_value()) << input.error().to_string();
    EXPECT_EQ(input->size(), 8000u);
    AudioBuffer mono = testing::sine(16000, 0.25);
    auto same = to_whisper_input(mono);
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(*same, mono.samples);
    AudioBuffer bad{.sample_rate = 5, .channels = 1, .samples = {0.0f}};
    EXPECT_FALSE(to_whisper_input(bad).has_value());
}

}  // namespace
}  // namespace omnirt::media

// Silero VAD v5 computed by omnirt against the npm package's own model run by onnxruntime-web
// (tests/vad/goldens), and the model loader's errors on hostile files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "vad/silero_vad.h"
#include "vad_test_data.h"

namespace omnirt::vad {
namespace {

using testing::golden_recordings;

std::vector<float> probabilities_of(SileroStream& stream, const std::vector<std::int16_t>& pcm) {
    std::vector<float> probabilities;
    std::vector<float> window(SileroModel::kWindow);
    for (std::size_t start = 0; start + SileroModel::kWindow <= pcm.size();
         start += SileroModel::kWindow) {
        for (int i = 0; i < SileroModel::kWindow; ++i) {
            window[i] = static_cast<float>(pcm[start + i]) / 32768.0f;
        }
        probabilities.push_back(stream.process(window));
    }
    return probabilities;
}

TEST(SileroVadTest, GoldenFilesDescribeTheModelInTheCache) {
    const auto golden = testing::golden_json();
    EXPECT_EQ(golden["model"]["sha256"],
              "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f");
    EXPECT_EQ(golden["sample_rate"], SileroModel::kSampleRate);
    EXPECT_EQ(golden["window"], SileroModel::kWindow);
    EXPECT_GE(golden["recordings"].size(), 4u);
}

TEST(SileroVadTest, MatchesOnnxRuntimeOnEveryGoldenRecording) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    SileroStream stream(model);
    for (const auto& recording : golden_recordings()) {
        SCOPED_TRACE(recording.name);
        stream.reset();
        const auto probabilities = probabilities_of(stream, recording.pcm);
        ASSERT_EQ(probabilities.size(), recording.probabilities.size());
        float worst = 0;
        for (std::size_t i = 0; i < probabilities.size(); ++i) {
            EXPECT_NEAR(probabilities[i], recording.probabilities[i], 1e-3f) << "window " << i;
            worst = std::max(worst, std::abs(probabilities[i] - recording.probabilities[i]));
        }
        std::printf("%-22s %4zu windows, max |omnirt - onnxruntime| = %.2e\n",
                    recording.name.c_str(), probabilities.size(), static_cast<double>(worst));
    }
}

TEST(SileroVadTest, GoldenRecordingsSaySpeechWhereThereIsSpeech) {
    // A sanity check of the goldens themselves (not of omnirt): speech is detected in speech,
    // never in digital silence or white noise.
    for (const auto& recording : golden_recordings()) {
        const float peak =
            *std::max_element(recording.probabilities.begin(), recording.probabilities.end());
        if (recording.name.find("speech") != std::string::npos) {
            EXPECT_GT(peak, 0.9f) << recording.name;
        } else {
            EXPECT_LT(peak, 0.5f) << recording.name;
        }
    }
}

TEST(SileroVadTest, ResetRestartsTheStreamAndStreamsAreIndependent) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    const auto speech = testing::golden_recording("speech");
    SileroStream stream(model);
    const auto first = probabilities_of(stream, speech.pcm);
    stream.reset();
    EXPECT_EQ(probabilities_of(stream, speech.pcm), first);

    // Four streams on four threads share one model and agree with the single stream.
    std::vector<std::vector<float>> results(4);
    std::vector<std::thread> threads;
    for (auto& result : results) {
        threads.emplace_back([&model, &speech, &result] {
            SileroStream own(model);
            result = probabilities_of(own, speech.pcm);
        });
    }
    for (auto& thread : threads) thread.join();
    for (const auto& result : results) EXPECT_EQ(result, first);
}

TEST(SileroVadTest, FullScaleInputStaysFinite) {
    OMNIRT_VAD_MODEL_OR_SKIP(model);
    SileroStream stream(model);
    std::vector<float> window(SileroModel::kWindow);
    for (int round = 0; round < 50; ++round) {
        for (int i = 0; i < SileroModel::kWindow; ++i) window[i] = (i + round) % 2 ? 1.0f : -1.0f;
        const float p = stream.process(window);
        ASSERT_TRUE(std::isfinite(p));
        ASSERT_GE(p, 0.0f);
        ASSERT_LE(p, 1.0f);
    }
}

class SileroLoadTest : public ::testing::Test {
  protected:
    std::string write(const std::string& name, const std::string& bytes) {
        const auto path = (std::filesystem::temp_directory_path() /
                           ("omnirt_vad_" + std::to_string(::getpid()) + "_" + name))
                              .string();
        std::ofstream(path, std::ios::binary) << bytes;
        paths_.push_back(path);
        return path;
    }
    void TearDown() override {
        for (const auto& path : paths_) std::filesystem::remove(path);
    }
    std::vector<std::string> paths_;
};

TEST_F(SileroLoadTest, MissingFileIsNotFoundAndNamesTheFetchScript) {
    auto model = SileroModel::load("/nonexistent/silero_vad_v5.onnx");
    ASSERT_FALSE(model);
    EXPECT_EQ(model.error().code, ErrorCode::not_found);
    EXPECT_NE(model.error().message.find("fetch_vad_model.sh"), std::string::npos);
    auto directory = SileroModel::load(std::filesystem::temp_directory_path().string());
    ASSERT_FALSE(directory);
}

TEST_F(SileroLoadTest, EmptyAndGarbageFilesAreNotModels) {
    auto empty = SileroModel::load(write("empty.onnx", ""));
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code, ErrorCode::data_loss);

    std::mt19937 random(7);
    std::string garbage(4096, '\0');
    for (char& c : garbage) c = static_cast<char>(random());
    auto model = SileroModel::load(write("garbage.onnx", garbage));
    ASSERT_FALSE(model);
    EXPECT_TRUE(model.error().code == ErrorCode::data_loss ||
                model.error().code == ErrorCode::invalid_argument)
        << model.error().to_string();
}

TEST_F(SileroLoadTest, AnOnnxModelThatIsNotSileroIsRejected) {
    // ModelProto{ir_version: 8, graph: GraphProto{name: "g"}}: valid ONNX, no Silero tensors.
    const std::string bytes = std::string("\x08\x08", 2) + std::string("\x3a\x03\x12\x01g", 5);
    auto model = SileroModel::load(write("other.onnx", bytes));
    ASSERT_FALSE(model);
    EXPECT_EQ(model.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(model.error().message.find("not a Silero VAD v5"), std::string::npos)
        << model.error().message;
}

TEST_F(SileroLoadTest, LoadsFromBytesLikeFromTheFile) {
    OMNIRT_VAD_MODEL_OR_SKIP(from_file);
    const std::string bytes = testing::read_file_bytes(default_model_path());
    auto from_memory = SileroModel::load_from_bytes(bytes, "cached model");
    ASSERT_TRUE(from_memory) << from_memory.error().to_string();
    const auto speech = testing::golden_recording("speech");
    SileroStream a(from_file);
    SileroStream b(*from_memory);
    EXPECT_EQ(probabilities_of(a, speech.pcm), probabilities_of(b, speech.pcm));

    auto empty = SileroModel::load_from_bytes("", "nothing");
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code, ErrorCode::data_loss);
    EXPECT_NE(empty.error().message.find("nothing"), std::string::npos);
}

TEST_F(SileroLoadTest, TruncatedAndCorruptedModelFilesFailCleanly) {
    const std::string path = default_model_path();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no model at " << path;
    const std::string bytes = testing::read_file_bytes(path);
    for (std::size_t keep :
         {std::size_t{1}, std::size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
        SCOPED_TRACE(keep);
        auto model = SileroModel::load(write("truncated.onnx", bytes.substr(0, keep)));
        EXPECT_FALSE(model);
    }
    // Flipped bytes all over the file: either an error or a model; never a crash.
    std::mt19937 random(11);
    for (int round = 0; round < 20; ++round) {
        std::string corrupted = bytes;
        for (int flip = 0; flip < 16; ++flip) {
            corrupted[random() % corrupted.size()] ^= static_cast<char>(1 + random() % 255);
        }
        auto model = SileroModel::load(write("corrupted.onnx", corrupted));
        if (model) {
            SileroStream stream(*model);
            std::vector<float> window(SileroModel::kWindow, 0.01f);
            (void)stream.process(window);
        }
    }
}

}  // namespace
}  // namespace omnirt::vad

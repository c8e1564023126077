// Black-box: the real omnirt binary with the S2-Pro plugin. make-checkpoint --arch s2_pro writes
// the release layout (codec included); `omnirt run` drives configs/s2_pro_tts.yaml (preprocess
// -> tts -> streaming vocoder) over it, with and without reference codes, to 2048 samples per
// frame; `omnirt serve --model-path` picks that pipeline; `omnirt bench generate` runs the
// family's AR stage.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/command.h"

namespace omnirt::testing {
namespace {

namespace fs = std::filesystem;

class S2ProPipelineCommand : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new fs::path(fs::path(::testing::TempDir()) /
                            ("omnirt-s2-pro-" + std::to_string(::getpid())));
        fs::remove_all(*dir_);
        auto made = run_command({omnirt_binary(), "make-checkpoint", "--arch", "s2_pro", "--preset",
                                 "tiny", "--out", dir_->string(), "--quiet"});
        ASSERT_EQ(made.exit_code, 0) << made.err;
    }
    static void TearDownTestSuite() {
        fs::remove_all(*dir_);
        delete dir_;
    }

    // The last JSON line of `omnirt run`'s stdout (the result).
    static nlohmann::json run(const std::string& input, const std::string& params) {
        auto result = run_command(
            {omnirt_binary(), "run", "--config", source_path("configs/s2_pro_tts.yaml"), "--set",
             "model_path=" + dir_->string(), "--in-process", "--input", input, "--params", params});
        EXPECT_EQ(result.exit_code, 0) << result.err;
        std::istringstream lines(result.out);
        std::string line, last;
        while (std::getline(lines, line)) {
            if (!line.empty()) last = line;
        }
        return nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
    }

    static fs::path* dir_;
};

fs::path* S2ProPipelineCommand::dir_ = nullptr;

TEST_F(S2ProPipelineCommand, CheckpointHasTheReleaseLayoutAndACodec) {
    for (const char* file : {"config.json", "model.safetensors.index.json", "tokenizer.json",
                             "tokenizer_config.json", "codec.safetensors"}) {
        EXPECT_TRUE(fs::exists(*dir_ / file)) << file;
    }
}

TEST_F(S2ProPipelineCommand, RunsTheTtsPipelineToAudio) {
    const nlohmann::json plain =
        run(R"({"text": "Hello there."})", R"({"max_tokens": 6, "seed": 1})");
    ASSERT_TRUE(plain.contains("data")) << plain.dump();
    const std::int64_t frames = plain["data"]["frames"].get<std::int64_t>();
    EXPECT_GE(frames, 1);
    EXPECT_LE(frames, 6);
    EXPECT_EQ(plain["data"]["samples"].get<std::int64_t>(), 2048 * frames);
    EXPECT_EQ(plain["data"]["sample_rate"].get<std::int64_t>(), 44100);

    nlohmann::json codes = nlohmann::json::array();
    for (int k = 0; k < 10; ++k) codes.push_back({k, k + 1, k + 2});
    const nlohmann::json input = {
        {"text", "Say it again."},
        {"references", {{{"text", "A reference."}, {"vq_codes", codes}}}}};
    const nlohmann::json cloned = run(input.dump(), R"({"max_tokens": 4, "seed": 2})");
    ASSERT_TRUE(cloned.contains("data")) << cloned.dump();
    EXPECT_EQ(cloned["data"]["samples"].get<std::int64_t>(),
              2048 * cloned["data"]["frames"].get<std::int64_t>());
    EXPECT_GT(cloned["data"]["usage"]["prompt_tokens"].get<std::int64_t>(),
              plain["data"]["usage"]["prompt_tokens"].get<std::int64_t>());
}

TEST_F(S2ProPipelineCommand, ServePicksTheTtsPipelineOfAnS2ProCheckpoint) {
    // Without --config, serve runs the family's built-in pipeline with the family's plugin: a
    // missing plugin named by the family's variable proves which one was picked (a successful
    // start is a server; tests/e2e covers those).
    auto result =
        run_command({"/usr/bin/env", "OMNIRT_S2_PRO_PLUGIN=/nonexistent/plugin.so", omnirt_binary(),
                     "serve", "--port", "0", "--model-path", dir_->string()});
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_NE(result.err.find("OMNIRT_S2_PRO_PLUGIN"), std::string::npos) << result.err;
}

TEST_F(S2ProPipelineCommand, BenchGenerateRunsTheFamilysArStage) {
    auto result = run_command({omnirt_binary(), "bench", "generate", "--model-path", dir_->string(),
                               "--batch", "1,2", "--input-len", "8", "--output-len", "4", "--dtype",
                               "float32", "--bandwidth-mib", "64", "--threads", "1"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("s2_pro slow AR"), std::string::npos) << result.out;
    EXPECT_EQ(result.out.find("a request failed"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace omnirt::testing

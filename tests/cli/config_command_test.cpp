// Black-box tests of `omnirt config validate` and `omnirt config show` on the real binary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "runner/builtins.h"
#include "support/command.h"

namespace omnirt {
namespace {

using testing::omnirt_binary;
using testing::run_command;
using testing::source_path;

std::string write_temp(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path) << text;
    return path;
}

TEST(ConfigShow, QwenOmniSpeechJsonListsItsStagesAndBothEdgeKinds) {
    auto result = run_command({omnirt_binary(), "config", "show",
                               source_path("configs/qwen3_omni_speech.yaml"), "--format", "json"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    auto plan = nlohmann::json::parse(result.out);
    ASSERT_EQ(plan["stages"].size(), 8u);
    std::set<std::string> names;
    for (const auto& stage : plan["stages"]) {
        names.insert(stage["name"].get<std::string>());
        EXPECT_FALSE(stage["process"].get<std::string>().empty());
        EXPECT_FALSE(stage["endpoint"].get<std::string>().empty());
    }
    // The code predictor runs inside the talker's engine step (its depth model).
    EXPECT_EQ(names,
              (std::set<std::string>{"preprocessing", "image_encoder", "audio_encoder",
                                     "mm_aggregate", "thinker", "decode", "talker", "code2wav"}));
    EXPECT_EQ(plan["entry_stage"], "preprocessing");
    EXPECT_EQ(plan["terminal_stages"], nlohmann::json({"decode", "code2wav"}));
    std::set<std::string> stream_edges, normal_edges;
    for (const auto& e : plan["edges"]) {
        std::string edge = e["from"].get<std::string>() + "->" + e["to"].get<std::string>();
        (e["kind"] == "stream" ? stream_edges : normal_edges).insert(edge);
    }
    EXPECT_EQ(stream_edges,
              (std::set<std::string>{"thinker->decode", "thinker->talker", "talker->code2wav"}));
    EXPECT_TRUE(normal_edges.contains("preprocessing->image_encoder"));
    EXPECT_TRUE(normal_edges.contains("image_encoder->mm_aggregate"));
    EXPECT_TRUE(normal_edges.contains("mm_aggregate->talker"));
    EXPECT_TRUE(normal_edges.contains("thinker->decode"));
    EXPECT_TRUE(normal_edges.contains("talker->code2wav"));
}

TEST(ConfigShow, TextAndMermaidFormats) {
    for (const char* config : {"configs/qwen3_omni_speech.yaml", "configs/test_pipeline.yaml"}) {
        auto text = run_command({omnirt_binary(), "config", "show", source_path(config)});
        ASSERT_EQ(text.exit_code, 0) << text.err;
        EXPECT_NE(text.out.find("processes:"), std::string::npos);
        auto mermaid = run_command(
            {omnirt_binary(), "config", "show", source_path(config), "--format", "mermaid"});
        ASSERT_EQ(mermaid.exit_code, 0) << mermaid.err;
        EXPECT_EQ(mermaid.out.rfind("graph TD", 0), 0u);
    }
    auto bad = run_command({omnirt_binary(), "config", "show",
                            source_path("configs/test_pipeline.yaml"), "--format", "yaml"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("unknown format 'yaml'"), std::string::npos);
}

TEST(ConfigShow, SetOverridesApply) {
    auto result =
        run_command({omnirt_binary(), "config", "show",
                     source_path("configs/qwen3_omni_speech.yaml"), "--format", "json", "--set",
                     "stages.thinker.factory_args.max_seq_len=4096", "--set", "relay_backend=ucx"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    auto plan = nlohmann::json::parse(result.out);
    EXPECT_EQ(plan["relay_backend"], "ucx");
    for (const auto& stage : plan["stages"]) {
        if (stage["name"] == "thinker") EXPECT_EQ(stage["factory_args"]["max_seq_len"], 4096);
    }
}

TEST(ConfigValidate, ReportsFactoriesNobodyRegistered) {
    const std::string config = write_temp("unknown_factory.yaml", R"(name: x
model_path: none
stages:
  - name: a
    factory: qwen3_omni.nobody
    terminal: true
)");
    auto result = run_command({omnirt_binary(), "config", "validate", config});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.err.find("unknown factory 'qwen3_omni.nobody'"), std::string::npos)
        << result.err;
    EXPECT_NE(result.err.find("errors"), std::string::npos);
}

// The speech pipeline's factories and functions come from the Qwen3-Omni plugin it names.
TEST(ConfigValidate, AcceptsTheSpeechPipelineWithItsPlugin) {
    // The config names its plugin by file name: the one in this build's lib/ (any build
    // directory).
    auto result = run_command(
        {omnirt_binary(), "config", "validate", source_path("configs/qwen3_omni_speech.yaml")});
    EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST(ConfigValidate, AcceptsPipelinesOfBuiltInStages) {
    ASSERT_EQ(::unsetenv(runner::kTestStagesEnv), 0);
    auto demo =
        run_command({omnirt_binary(), "config", "validate", source_path("configs/demo.yaml")});
    EXPECT_EQ(demo.exit_code, 0) << demo.err;
    EXPECT_NE(demo.out.find(": ok ("), std::string::npos) << demo.out;
}

// The test stages count as registered only with the opt-in, as when a pipeline runs.
TEST(ConfigValidate, AcceptsTestStagesOnlyWithTheOptIn) {
    const std::string config = source_path("configs/test_pipeline.yaml");
    ASSERT_EQ(::unsetenv(runner::kTestStagesEnv), 0);
    auto without = run_command({omnirt_binary(), "config", "validate", config});
    EXPECT_EQ(without.exit_code, 1);
    EXPECT_NE(without.err.find("unknown factory 'test."), std::string::npos) << without.err;
    EXPECT_NE(without.err.find("OMNIRT_TEST_STAGES=1"), std::string::npos) << without.err;

    ASSERT_EQ(::setenv(runner::kTestStagesEnv, "1", 1), 0);
    auto with = run_command({omnirt_binary(), "config", "validate", config});
    ASSERT_EQ(::unsetenv(runner::kTestStagesEnv), 0);
    EXPECT_EQ(with.exit_code, 0) << with.err;
    EXPECT_NE(with.out.find(": ok ("), std::string::npos) << with.out;
}

TEST(ConfigValidate, ListsEveryErrorWithLocation) {
    std::string path = write_temp("broken.yaml", R"(model_path: m
stages:
  - name: a
    process: p
    factory: f
    next: missing
    terminal: true
  - name: a
    process: p
    factory: f
    bogus_key: 1
)");
    auto result = run_command({omnirt_binary(), "config", "validate", path});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.err.find(path + ":"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("bogus_key"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("missing"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("terminal"), std::string::npos) << result.err;
}

TEST(ConfigValidate, MissingFileAndUsageErrors) {
    auto missing = run_command({omnirt_binary(), "config", "validate", "/nonexistent.yaml"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("/nonexistent.yaml"), std::string::npos);
    auto usage = run_command({omnirt_binary(), "config", "validate"});
    EXPECT_EQ(usage.exit_code, 2);
    auto unknown = run_command({omnirt_binary(), "frobnicate"});
    EXPECT_EQ(unknown.exit_code, 2);
}

}  // namespace
}  // namespace omnirt

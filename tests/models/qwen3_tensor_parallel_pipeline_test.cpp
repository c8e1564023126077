// A qwen3.thinker stage with tp_size 2 through the whole pipeline runtime (black box: `omnirt
// run` with the Qwen3 plugin over a generated checkpoint): one process per rank, and all ranks
// in one process (--in-process); the streamed tokens and the result equal those of tp_size 1.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "models/qwen3/make_checkpoint.h"
#include "support/command.h"

namespace omnirt::models::qwen3 {
namespace {

namespace fs = std::filesystem;

struct RunOutput {
    std::vector<int> streamed;  // token_id of every client chunk
    nlohmann::json data;        // the result's data
};

class Qwen3TensorParallelPipeline : public ::testing::TestWithParam<bool> {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "omnirt-tp-pipeline-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        auto made = make_checkpoint(dir_ / "model", {.preset = "tiny",
                                                     .moe = GetParam(),
                                                     .seed = 8,
                                                     .dtype = DType::f32,
                                                     .init_std = 0.15});
        ASSERT_TRUE(made.has_value()) << made.error().to_string();
    }
    void TearDown() override { fs::remove_all(dir_); }

    // A pipeline of one terminal qwen3.thinker stage of `tp_size` ranks.
    std::string write_config(int tp_size) const {
        const fs::path path = dir_ / ("tp" + std::to_string(tp_size) + ".yaml");
        std::ofstream out(path);
        out << "name: qwen3-tp\n"
            << "model_path: " << (dir_ / "model").string() << "\n"
            << "relay_backend: shm\n"
            << "plugins: [" << OMNIRT_BINARY_DIR << "/lib/libomnirt_qwen3_plugin.so]\n"
            << "stages:\n"
            << "  - name: thinker\n"
            << "    factory: qwen3.thinker\n"
            << (tp_size > 1 ? "    tp_size: " + std::to_string(tp_size) + "\n"
                            : std::string("    process: main\n"))
            << "    factory_args: {dtype: float32, max_total_tokens: 1024, "
               "max_prefill_tokens: 8, tp_timeout_s: 60}\n"
            << "    terminal: true\n";
        return path.string();
    }

    static RunOutput run(const std::string& config, bool in_process) {
        std::vector<std::string> argv = {
            testing::omnirt_binary(),
            "run",
            "--config",
            config,
            "--stream",
            "--input",
            R"({"messages": [{"role": "user", "content": "Tell me about tensor parallelism."}]})",
            "--params",
            R"({"max_tokens": 20, "sampling": {"temperature": 0}})"};
        if (in_process) argv.push_back("--in-process");
        const testing::CommandResult result = testing::run_command(argv);
        EXPECT_EQ(result.exit_code, 0) << result.err;
        RunOutput output;
        std::istringstream lines(result.out);
        for (std::string line; std::getline(lines, line);) {
            if (line.empty()) continue;
            const nlohmann::json json = nlohmann::json::parse(line);
            if (json.contains("chunk")) {
                output.streamed.push_back(json["chunk"]["token_id"].get<int>());
            } else {
                output.data = json["data"];
            }
        }
        return output;
    }

    fs::path dir_;
};

// A result's data without usage.engine_time_s (the seconds the thinker spent on the request,
// which differ from run to run), after checking it is there and a duration.
nlohmann::json without_engine_time(nlohmann::json data) {
    EXPECT_TRUE(data.contains("usage") && data["usage"].contains("engine_time_s")) << data.dump();
    if (data.contains("usage") && data["usage"].contains("engine_time_s")) {
        EXPECT_TRUE(data["usage"]["engine_time_s"].is_number()) << data.dump();
        EXPECT_GE(data["usage"]["engine_time_s"].get<double>(), 0.0) << data.dump();
        data["usage"].erase("engine_time_s");
    }
    return data;
}

TEST_P(Qwen3TensorParallelPipeline, TwoRanksAnswerLikeOne) {
    const RunOutput single = run(write_config(1), /*in_process=*/false);
    ASSERT_EQ(single.streamed.size(), 20u);
    ASSERT_TRUE(single.data.contains("output_ids")) << single.data.dump();
    EXPECT_EQ(single.data["output_ids"]["tensor"]["values"], nlohmann::json(single.streamed));

    const std::string config = write_config(2);
    for (bool in_process : {false, true}) {
        const RunOutput parallel = run(config, in_process);
        EXPECT_EQ(parallel.streamed, single.streamed) << "in_process " << in_process;
        EXPECT_EQ(without_engine_time(parallel.data), without_engine_time(single.data))
            << "in_process " << in_process;
    }
}

// The shipped chat pipelines, configs/qwen3_chat.yaml and configs/qwen3_chat_tp2.yaml (text
// stages around the thinker, tokens streamed to decode), answer alike over the generated
// checkpoint: same streamed text and same result.
TEST_P(Qwen3TensorParallelPipeline, ShippedChatConfigsAnswerAlike) {
    const auto shipped = [&](const std::string& name) {
        std::ifstream in(testing::source_path("configs/" + name));
        std::stringstream text;
        text << in.rdbuf();
        std::string yaml = text.str();
        // The test's checkpoint (the plugin, a bare name, comes from this build's lib/).
        const std::string model = "model_path: /tmp/qwen3-tiny";
        const auto model_at = yaml.find(model);
        EXPECT_NE(model_at, std::string::npos) << name;
        if (model_at != std::string::npos) {
            yaml.replace(model_at, model.size(), "model_path: " + (dir_ / "model").string());
        }
        const fs::path path = dir_ / name;
        std::ofstream(path) << yaml;
        return path.string();
    };
    const auto answer = [](const std::string& config) {
        const testing::CommandResult result = testing::run_command(
            {testing::omnirt_binary(), "run", "--config", config, "--stream", "--input",
             R"({"messages": [{"role": "user", "content": "Two ranks, one answer?"}]})", "--params",
             R"({"max_tokens": 16, "sampling": {"temperature": 0}})"});
        EXPECT_EQ(result.exit_code, 0) << result.err;
        std::string streamed;
        nlohmann::json data;
        std::istringstream lines(result.out);
        for (std::string line; std::getline(lines, line);) {
            if (line.empty()) continue;
            const nlohmann::json json = nlohmann::json::parse(line);
            if (json.contains("chunk")) {
                streamed += json["chunk"].value("text", "");
            } else {
                data = json["data"];
            }
        }
        return std::make_tuple(streamed, data, result.err);
    };
    const auto [single_text, single, single_log] = answer(shipped("qwen3_chat.yaml"));
    ASSERT_TRUE(single.contains("text")) << single.dump();
    EXPECT_FALSE(single_text.empty());
    EXPECT_EQ(single["usage"]["completion_tokens"], 16);
    EXPECT_EQ(single_text, single["text"].get<std::string>());
    const auto [parallel_text, parallel, parallel_log] = answer(shipped("qwen3_chat_tp2.yaml"));
    // Two rank processes ran (their logs are tagged with the rank's process name).
    EXPECT_NE(parallel_log.find("[thinker_tp1]"), std::string::npos) << parallel_log;
    EXPECT_EQ(single_log.find("[thinker_tp1]"), std::string::npos);
    EXPECT_EQ(parallel_text, single_text);
    EXPECT_EQ(without_engine_time(parallel), without_engine_time(single));
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, Qwen3TensorParallelPipeline, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Moe" : "Dense"; });

}  // namespace
}  // namespace omnirt::models::qwen3

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

TEST_P(Qwen3TensorParallelPipeline, TwoRanksAnswerLikeOne) {
    const RunOutput single = run(write_config(1), /*in_process=*/false);
    ASSERT_EQ(single.streamed.size(), 20u);
    ASSERT_TRUE(single.data.contains("output_ids")) << single.data.dump();
    EXPECT_EQ(single.data["output_ids"]["tensor"]["values"], nlohmann::json(single.streamed));

    const std::string config = write_config(2);
    for (bool in_process : {false, true}) {
        const RunOutput parallel = run(config, in_process);
        EXPECT_EQ(parallel.streamed, single.streamed) << "in_process " << in_process;
        EXPECT_EQ(parallel.data, single.data) << "in_process " << in_process;
    }
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, Qwen3TensorParallelPipeline, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Moe" : "Dense"; });

}  // namespace
}  // namespace omnirt::models::qwen3

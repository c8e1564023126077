// Black-box tests of `omnirt bench generate` on the real binary (the model runs through the
// Qwen3 plugin): a generated tiny checkpoint and the tiny preset with dummy weights, at small
// sizes; the report's shape, not its speed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/command.h"

namespace omnirt::testing {
namespace {

class BenchGenerateCommand : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new std::filesystem::path(std::filesystem::path(::testing::TempDir()) /
                                         ("omnirt-bench-generate-" + std::to_string(::getpid())));
        std::filesystem::remove_all(*dir_);
        auto made = run_command({omnirt_binary(), "make-checkpoint", "--arch", "qwen3", "--preset",
                                 "tiny", "--out", (*dir_ / "tiny").string(), "--quiet"});
        ASSERT_EQ(made.exit_code, 0) << made.err;
    }
    static void TearDownTestSuite() {
        std::filesystem::remove_all(*dir_);
        delete dir_;
    }

    static std::vector<std::string> small(std::vector<std::string> args) {
        std::vector<std::string> argv = {
            omnirt_binary(), "bench", "generate",        "--input-len", "8",
            "--output-len",  "4",     "--bandwidth-mib", "64"};
        argv.insert(argv.end(), args.begin(), args.end());
        return argv;
    }

    static nlohmann::json read_json(const std::filesystem::path& path) {
        std::ifstream in(path);
        return nlohmann::json::parse(in);
    }

    static std::filesystem::path* dir_;
};

std::filesystem::path* BenchGenerateCommand::dir_ = nullptr;

TEST_F(BenchGenerateCommand, ReportsEveryBatchOfACheckpoint) {
    const auto json_path = *dir_ / "checkpoint.json";
    auto result = run_command(small({"--model-path", (*dir_ / "tiny").string(), "--batch", "1,3",
                                     "--dtype", "float32", "--json", json_path.string()}));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("TTFT p50 ms"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("read bandwidth"), std::string::npos) << result.out;
    const auto report = read_json(json_path);
    EXPECT_EQ(report["load_format"], "auto");
    EXPECT_EQ(report["dtype"], "float32");
    EXPECT_EQ(report["input_len"], 8);
    EXPECT_EQ(report["output_len"], 4);
    EXPECT_GT(report["read_bandwidth_gbps"].get<double>(), 0);
    EXPECT_GT(report["parameters"].get<std::int64_t>(), 0);
    ASSERT_EQ(report["batches"].size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
        const auto& row = report["batches"][i];
        EXPECT_EQ(row["batch"], i == 0 ? 1 : 3);
        EXPECT_EQ(row["failed"], 0);
        EXPECT_GT(row["ttft_p50_ms"].get<double>(), 0);
        EXPECT_GE(row["ttft_max_ms"].get<double>(), row["ttft_p50_ms"].get<double>());
        EXPECT_GT(row["decode_tokens_per_second_per_request"].get<double>(), 0);
        EXPECT_GE(row["decode_tokens_per_second_aggregate"].get<double>(),
                  row["decode_tokens_per_second_per_request"].get<double>());
        EXPECT_GT(row["roofline_step_ms"].get<double>(), 0);
        EXPECT_GE(row["roofline_with_kv_step_ms"].get<double>(),
                  row["roofline_step_ms"].get<double>());
        EXPECT_GT(row["read_bandwidth_after_gbps"].get<double>(), 0);  // probed after the batch
        // float32: four bytes per weight read; lm_head alone is vocab x hidden.
        EXPECT_GT(row["weight_bytes_per_step"].get<double>(),
                  4.0 * report["parameters"].get<double>() * 0.5);
    }
}

TEST_F(BenchGenerateCommand, PresetRunsOnDummyWeightsWithoutFiles) {
    const auto json_path = *dir_ / "preset.json";
    auto result =
        run_command(small({"--preset", "tiny", "--batch", "2", "--json", json_path.string()}));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto report = read_json(json_path);
    EXPECT_EQ(report["load_format"], "dummy");
    EXPECT_EQ(report["dtype"], "bfloat16");
    ASSERT_EQ(report["batches"].size(), 1u);
    EXPECT_EQ(report["batches"][0]["failed"], 0);
}

TEST_F(BenchGenerateCommand, BadFlagsAreUsageErrors) {
    const std::string model = (*dir_ / "tiny").string();
    auto both = run_command(small({"--model-path", model, "--preset", "tiny"}));
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("exactly one of --model-path and --preset"), std::string::npos)
        << both.err;
    auto batch = run_command(small({"--preset", "tiny", "--batch", "1,x"}));
    EXPECT_EQ(batch.exit_code, 2);
    EXPECT_NE(batch.err.find("--batch"), std::string::npos) << batch.err;
    auto format = run_command(small({"--preset", "tiny", "--load-format", "auto"}));
    EXPECT_EQ(format.exit_code, 2);
    auto dtype = run_command(small({"--preset", "tiny", "--dtype", "int8"}));
    EXPECT_EQ(dtype.exit_code, 2);
    auto plugin =
        run_command(small({"--preset", "tiny", "--plugin", (*dir_ / "none.so").string()}));
    EXPECT_EQ(plugin.exit_code, 1);
    EXPECT_NE(plugin.err.find("none.so"), std::string::npos) << plugin.err;
    auto missing = run_command(small({"--model-path", (*dir_ / "absent").string()}));
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("config.json"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace omnirt::testing

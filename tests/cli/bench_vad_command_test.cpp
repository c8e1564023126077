// Black-box tests of `omnirt bench vad` on the real binary: the report's shape, not its speed.
// Skips when the Silero VAD model is not in the cache (scripts/fetch_vad_model.sh).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/command.h"

namespace omnirt::testing {
namespace {

TEST(BenchVadCommand, ReportsEveryCaseAsTableAndJson) {
    const auto json_path = std::filesystem::path(::testing::TempDir()) /
                           ("omnirt-bench-vad-" + std::to_string(::getpid()) + ".json");
    auto result = run_command({omnirt_binary(), "bench", "vad", "--seconds", "2", "--iterations",
                               "1", "--warmup", "0", "--json", json_path.string()});
    if (result.exit_code != 0 && result.err.find("fetch_vad_model.sh") != std::string::npos) {
        GTEST_SKIP() << "no Silero VAD model in the cache: " << result.err;
    }
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("x realtime"), std::string::npos) << result.out;
    std::ifstream in(json_path);
    const auto report = nlohmann::json::parse(in);
    std::filesystem::remove(json_path);
    EXPECT_EQ(report["windows"], 62);  // 2 s of 16 kHz audio in 512-sample windows
    ASSERT_EQ(report["cases"].size(), 4u);
    for (const auto& c : report["cases"]) {
        EXPECT_GT(c["best_ms"].get<double>(), 0.0) << c["name"];
        EXPECT_GT(c["realtime_factor"].get<double>(), 0.0) << c["name"];
    }
    EXPECT_GT(report["gflops"].get<double>(), 0.0);
}

TEST(BenchVadCommand, AMissingModelFileIsAClearError) {
    auto result = run_command(
        {omnirt_binary(), "bench", "vad", "--model", "/nonexistent/silero_vad_v5.onnx"});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.err.find("not_found"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("fetch_vad_model.sh"), std::string::npos) << result.err;
}

TEST(BenchVadCommand, RejectsBadOptions) {
    auto result = run_command({omnirt_binary(), "bench", "vad", "--seconds", "0"});
    EXPECT_NE(result.exit_code, 0);
}

}  // namespace
}  // namespace omnirt::testing

// A tensor-parallel stage: one process per rank, rank 0 owns the stage's IO and fans every
// request out to the follower ranks; only rank 0's results leave the group.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "pipeline_harness.h"

namespace omnirt::testing {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

class TensorParallel : public ::testing::TestWithParam<Layout> {};

TEST_P(TensorParallel, EveryRankComputesTheSameRequestsAndOnlyRankZeroEmits) {
    char dir_template[] = "/tmp/omnirt-tp-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    std::string dir = dir_template;
    auto started = start_pipeline(R"(
name: tp
model_path: none
stages:
  - {name: front, process: front, factory: test.identity, next: tp}
  - {name: tp, factory: test.rank_log, factory_args: {dir: ")" +
                                      dir + R"("}, tp_size: 3,
     next: last}
  - {name: last, process: front, factory: test.identity, terminal: true}
)",
                                  GetParam());
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = *started;
    EXPECT_EQ(pipeline->plan().find_stage("tp")->processes.size(), 3u);
    std::vector<std::string> ids;
    for (int i = 0; i < 20; ++i) {
        ids.push_back("tp-" + std::to_string(i));
        auto result = pipeline->submit(ids.back(), OmniRequest{.inputs = Map{{"i", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, Value(Map{{"i", i}}));
    }
    // Ranks other than 0 emit nothing, so a result says nothing about when they logged: wait
    // for their logs (a hang guard, not a sleep), then stop.
    for (int rank = 0; rank < 3; ++rank) {
        const std::string log = dir + "/tp.rank" + std::to_string(rank) + ".log";
        EXPECT_TRUE(eventually([&] { return read_lines(log).size() >= ids.size(); })) << rank;
    }
    pipeline->stop();
    for (int rank = 0; rank < 3; ++rank) {
        EXPECT_EQ(read_lines(dir + "/tp.rank" + std::to_string(rank) + ".log"), ids) << rank;
    }
    std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TensorParallel,
    ::testing::Values(Layout{runner::Placement::in_process, false, "InProcess"},
                      Layout{runner::Placement::processes, false, "ChildProcesses"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace omnirt::testing

// `omnirt bench pipeline --stage-nodes` (bench/pipeline_bench.h): the pipeline it places on
// several nodes, and the placements it refuses before starting anything.
#include <gtest/gtest.h>

#include "bench/pipeline_bench.h"
#include "config/load.h"
#include "runner/builtins.h"

namespace omnirt::bench {
namespace {

TEST(PipelineBenchNodes, ConfigPlacesEachStageOnItsNode) {
    ASSERT_TRUE(runner::enable_test_stages().has_value());
    ASSERT_TRUE(runner::register_builtins().has_value());
    PipelineBenchOptions options{.stages = 3, .payload_bytes = 4096};
    options.stage_nodes = {0, 1, 0};
    options.base_port = 23000;
    auto config = config::load_pipeline_text(pipeline_bench_config(options), "<bench>");
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    ASSERT_EQ(config->stages.size(), 3u);
    EXPECT_EQ(config->stages[0].node.value_or(-1), 0);
    EXPECT_EQ(config->stages[1].node.value_or(-1), 1);
    EXPECT_EQ(config->stages[2].node.value_or(-1), 0);
    EXPECT_EQ(config->endpoints.base_port, 23000);

    // Without --stage-nodes nothing names a node.
    auto single = config::load_pipeline_text(pipeline_bench_config({.stages = 3}), "<bench>");
    ASSERT_TRUE(single.has_value()) << single.error().to_string();
    for (const auto& stage : single->stages) EXPECT_FALSE(stage.node.has_value()) << stage.name;
}

// Refused placements fail with the flag named, before any process starts (a hub that is never
// used: the checks come first).
TEST(PipelineBenchNodes, RefusesPlacementsThatDoNotFit) {
    auto hub = runner::NodeHub::create(
        {.bind_endpoint = "tcp://127.0.0.1:0", .nnodes = 2, .head_address = "127.0.0.1"});
    ASSERT_TRUE(hub.has_value()) << hub.error().to_string();
    PipelineBenchNodes nodes{.hub = hub->get(), .addresses = {"127.0.0.1", "127.0.0.2"}};
    auto refused = [&](PipelineBenchOptions options, const PipelineBenchNodes* placed) {
        auto report = run_pipeline_bench(options, placed);
        EXPECT_FALSE(report.has_value());
        return report ? std::string() : report.error().message;
    };
    PipelineBenchOptions options{.stages = 3, .requests = 1};
    options.stage_nodes = {0, 1};

    EXPECT_NE(refused(options, &nodes).find("2 entries for 3 stages"), std::string::npos);
    options.stage_nodes = {0, 2, 0};
    EXPECT_NE(refused(options, &nodes).find("node 2 is outside 0..1"), std::string::npos);
    options.stage_nodes = {0, -1, 0};
    EXPECT_NE(refused(options, &nodes).find("node -1 is outside"), std::string::npos);
    options.stage_nodes = {0, 1, 0};
    EXPECT_NE(refused(options, nullptr).find("needs --nnodes 2"), std::string::npos);
    options.same_process = true;
    EXPECT_NE(refused(options, &nodes).find("--same-process"), std::string::npos);
    options.same_process = false;
    options.base_port = 70000;
    EXPECT_NE(refused(options, &nodes).find("--base-port"), std::string::npos);
    options.stage_nodes.clear();
    options.base_port = 17000;
    EXPECT_NE(refused(options, &nodes).find("need --stage-nodes"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::bench

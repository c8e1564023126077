// A pipeline over two nodes in one test process (docs/multi_node.md): the head (NodeHub +
// Pipeline::start with node addresses) on 127.0.0.1 and node 1 (run_node_agent) on 127.0.0.2,
// with tensors crossing the nodes through the tiered relay (ucx over tcp), shm within node 0 and
// same-process dispatch within node 1. Results must equal the one-node run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "pipeline_harness.h"
#include "runner/builtins.h"
#include "two_nodes.h"

namespace omnirt::runner {
namespace {

using omnirt::testing::free_base_port;
using omnirt::testing::TwoNodes;
using std::chrono::milliseconds;

std::string pipeline_yaml(int base_port, bool two_nodes) {
    const std::string node1 = two_nodes ? ", node: 1" : "";
    return R"(
model_path: none
relay_backend: shm
endpoints: {scheme: tcp, base_port: )" +
           std::to_string(base_port) + R"(}
stages:
  - {name: ingest, process: a, factory: test.identity, next: produce}
  - {name: produce, process: b, factory: test.tensor_producer,
     factory_args: {bytes: 1048576, dtype: float32}, next: double}
  - {name: double, process: c, factory: test.arithmetic, factory_args: {scale: 2},
     next: last)" +
           node1 + R"(}
  - {name: last, process: c, factory: test.identity, terminal: true)" +
           node1 + R"(}
)";
}

TEST(PipelineMultiNode, TensorsCrossTheNodesAndMatchOneNode) {
    // Between the nodes UCX may use TCP only (what two hosts without RDMA have).
    ::setenv("UCX_TLS", "tcp", 1);
    ASSERT_TRUE(enable_test_stages().has_value());
    ASSERT_TRUE(register_builtins().has_value());
    const int base_port = free_base_port();
    ASSERT_GT(base_port, 0);

    // One node: the reference.
    std::vector<Value> expected;
    {
        auto single = omnirt::testing::start_pipeline(pipeline_yaml(base_port, false),
                                                      {.placement = Placement::processes});
        ASSERT_TRUE(single.has_value()) << single.error().to_string();
        for (int i = 0; i < 3; ++i) {
            auto result =
                (*single)->submit("one-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
            ASSERT_TRUE(result.has_value()) << result.error().to_string();
            expected.push_back(result->data);
        }
    }

    TwoNodes nodes;
    auto joined = nodes.join();
    ASSERT_TRUE(joined.has_value()) << joined.error().to_string();
    auto pipeline = nodes.start(pipeline_yaml(base_port, true));
    ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();

    // The plan: shm within node 0, ucx across, same-process dispatch within node 1.
    const auto& plan = (*pipeline)->plan();
    std::map<std::string, std::string> tiers;
    for (const auto& edge : plan.edges) tiers[edge.from + ">" + edge.to] = edge.tier;
    EXPECT_EQ(tiers["ingest>produce"], "shm");
    EXPECT_EQ(tiers["produce>double"], "ucx");
    EXPECT_EQ(tiers["double>last"], "local");
    EXPECT_EQ(plan.find_stage("double")->endpoint, "tcp://127.0.0.2:" + std::to_string(base_port));
    // Only node 0's process groups are children of the head.
    auto children = (*pipeline)->process_ids();
    EXPECT_TRUE(children.contains("a") && children.contains("b"));
    EXPECT_FALSE(children.contains("c"));

    for (int i = 0; i < 3; ++i) {
        auto result =
            (*pipeline)->submit("two-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, expected[static_cast<std::size_t>(i)]) << i;
    }
    EXPECT_TRUE((*pipeline)->health().healthy) << (*pipeline)->health().reason;

    // The head stops: node 1 stops its stages and its agent returns ok.
    nodes.hub().stop(milliseconds(10000));
    (*pipeline)->stop();
    auto node_status = nodes.stop_node();
    EXPECT_TRUE(node_status.has_value()) << node_status.error().to_string();
    EXPECT_EQ(omnirt::testing::count_instance_segments(plan.runtime_dir), 0);
}

// produce (node 0) -> double, two replicas: r0 on node 0, r1 on node 1 -> last (node 0).
std::string spread_replicas_yaml(int base_port, bool two_nodes) {
    return R"(
model_path: none
relay_backend: shm
endpoints: {scheme: tcp, base_port: )" +
           std::to_string(base_port) + R"(}
stages:
  - {name: produce, process: b, factory: test.tensor_producer,
     factory_args: {bytes: 1048576, dtype: float32}, next: double}
  - {name: double, process: c, factory: test.arithmetic, factory_args: {scale: 2},
     replicas: 2, next: last)" +
           (two_nodes ? ", node: [0, 1]" : "") + R"(}
  - {name: last, process: d, factory: test.identity, terminal: true}
)";
}

TEST(PipelineMultiNode, ReplicasSpreadOverNodesKeepServingWhenOneNodeGoes) {
    ::setenv("UCX_TLS", "tcp", 1);
    ASSERT_TRUE(enable_test_stages().has_value());
    ASSERT_TRUE(register_builtins().has_value());
    const int base_port = free_base_port();
    ASSERT_GT(base_port, 0);

    std::vector<Value> expected;
    {
        auto single = omnirt::testing::start_pipeline(spread_replicas_yaml(base_port, false),
                                                      {.placement = Placement::processes});
        ASSERT_TRUE(single.has_value()) << single.error().to_string();
        for (int i = 0; i < 8; ++i) {
            auto result =
                (*single)->submit("one-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
            ASSERT_TRUE(result.has_value()) << result.error().to_string();
            expected.push_back(result->data);
        }
    }

    TwoNodes nodes;
    auto joined = nodes.join();
    ASSERT_TRUE(joined.has_value()) << joined.error().to_string();
    auto pipeline = nodes.start(spread_replicas_yaml(base_port, true));
    ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
    const auto& plan = (*pipeline)->plan();
    std::map<std::string, std::string> tiers;
    for (const auto& edge : plan.edges) tiers[edge.from + ">" + edge.to] = edge.tier;
    EXPECT_EQ(tiers["produce>double"], "shm+ucx");
    EXPECT_EQ(tiers["double>last"], "shm+ucx");
    // Replica 0's process is the head's child, replica 1's runs on node 1.
    auto children = (*pipeline)->process_ids();
    EXPECT_TRUE(children.contains("c.r0"));
    EXPECT_FALSE(children.contains("c.r1"));

    // Round-robin: requests alternate between the replicas, so tensors cross to node 1 and
    // back through ucx and stay on node 0 through shm; the results equal one node's.
    for (int i = 0; i < 4; ++i) {
        auto result =
            (*pipeline)->submit("two-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, expected[static_cast<std::size_t>(i)]) << i;
    }
    EXPECT_TRUE((*pipeline)->health().healthy) << (*pipeline)->health().reason;

    // Node 1 leaves: only its replica is down; the stage is degraded, not down, and requests
    // go on through replica 0.
    auto node_status = nodes.stop_node();
    EXPECT_TRUE(node_status.has_value()) << node_status.error().to_string();
    auto health = (*pipeline)->health();
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
    while (!health.degraded && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(20));  // polling the reported state, a bound
        health = (*pipeline)->health();
    }
    EXPECT_FALSE(health.healthy);
    EXPECT_TRUE(health.degraded) << health.reason;
    for (const auto& stage : health.stages) {
        if (stage.stage == "double.r1") {
            EXPECT_EQ(stage.state, pipeline::StageState::restarting);
            EXPECT_NE(stage.down_reason.find("node 1 (127.0.0.2)"), std::string::npos)
                << stage.down_reason;
        } else {
            EXPECT_NE(stage.state, pipeline::StageState::restarting) << stage.stage;
        }
    }
    for (int i = 4; i < 8; ++i) {
        auto result =
            (*pipeline)->submit("two-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << i << ": " << result.error().to_string();
        EXPECT_EQ(result->data, expected[static_cast<std::size_t>(i)]) << i;
    }
    nodes.hub().stop(milliseconds(0));
    (*pipeline)->stop();
    EXPECT_EQ(omnirt::testing::count_instance_segments(plan.runtime_dir), 0);
}

}  // namespace
}  // namespace omnirt::runner

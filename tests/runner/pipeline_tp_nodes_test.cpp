// A tensor-parallel stage whose ranks run on two nodes (docs/multi_node.md "Tensor-parallel
// stages over several nodes"): the head on 127.0.0.1 runs rank 0, node 1 on 127.0.0.2 runs
// rank 1, and every request all-reduces a tensor over the stage's gloo group
// (test.tp_all_reduce, tests/runner/tp_all_reduce_plugin.cpp). Results must equal the one-node
// run; when node 1 leaves, the TP stage's requests fail at once naming the node, the head's rank
// is held down (not restarted alone), and once node 1 is back the stage serves again.
#include <gtest/gtest.h>

#include <cstdlib>

#include "pipeline_harness.h"
#include "runner/builtins.h"
#include "tp_all_reduce.h"
#include "two_nodes.h"

namespace omnirt::runner {
namespace {

using omnirt::testing::eventually;
using omnirt::testing::free_base_port;
using omnirt::testing::process_alive;
using omnirt::testing::two_rank_sum;
using omnirt::testing::TwoNodes;
using std::chrono::milliseconds;

std::string tp_yaml(int base_port, bool two_nodes) {
    return std::string(R"(
model_path: none
relay_backend: shm
plugins: [")" OMNIRT_TP_PLUGIN_PATH R"("]
endpoints: {scheme: tcp, base_port: )") +
           std::to_string(base_port) + "}\n" + (two_nodes ? "nodes: [head, gpu-a]\n" : "") +
           R"(stages:
  - {name: tp, factory: test.tp_all_reduce, tp_size: 2, next: last)" +
           (two_nodes ? ", node: [head, gpu-a]" : "") + R"(}
  - {name: last, process: last, factory: test.identity, terminal: true}
)";
}

const pipeline::StageHealth* stage_health(const pipeline::HealthReport& health,
                                          const std::string& stage) {
    for (const auto& entry : health.stages) {
        if (entry.stage == stage) return &entry;
    }
    return nullptr;
}

// Running means alive too (its heartbeat arrived).
bool stage_in(Pipeline& target, const std::string& stage, pipeline::StageState state) {
    auto health = target.health();
    const auto* entry = stage_health(health, stage);
    return entry != nullptr && entry->state == state &&
           (state != pipeline::StageState::running || entry->alive);
}

TEST(PipelineTpNodes, RanksOnTwoNodesAllReduceAndTheStageFailsAndComesBackAsAWhole) {
    ASSERT_TRUE(enable_test_stages().has_value());
    ASSERT_TRUE(register_builtins().has_value());
    const int base_port = free_base_port();
    ASSERT_GT(base_port, 0);

    // One node: the reference (both ranks on this host).
    std::vector<Value> expected;
    {
        auto single = omnirt::testing::start_pipeline(tp_yaml(base_port, false),
                                                      {.placement = Placement::processes});
        ASSERT_TRUE(single.has_value()) << single.error().to_string();
        for (int i = 0; i < 3; ++i) {
            auto result =
                (*single)->submit("one-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
            ASSERT_TRUE(result.has_value()) << result.error().to_string();
            EXPECT_EQ(result->data, two_rank_sum(i)) << i;
            expected.push_back(result->data);
        }
    }

    TwoNodes nodes({"head", "gpu-a"});
    auto joined = nodes.join();
    ASSERT_TRUE(joined.has_value()) << joined.error().to_string();
    auto started = nodes.start(tp_yaml(base_port, true));
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    Pipeline& head_pipeline = **started;

    // The plan: rank 0 on the head (the stage's endpoint and the rendezvous there), rank 1's
    // process and control endpoint on node 1.
    const auto& plan = head_pipeline.plan();
    const std::string head = "tcp://127.0.0.1:";
    EXPECT_EQ(plan.find_process("tp_tp0")->node, 0);
    EXPECT_EQ(plan.find_process("tp_tp1")->node, 1);
    EXPECT_EQ(plan.find_process("tp_tp0")->tp->rendezvous.rfind(head, 0), 0u);
    EXPECT_EQ(plan.find_process("tp_tp1")->tp->rendezvous,
              plan.find_process("tp_tp0")->tp->rendezvous);
    EXPECT_EQ(plan.find_process("tp_tp1")->tp->endpoint,
              "tcp://127.0.0.2:" + std::to_string(base_port));
    EXPECT_EQ(plan.node_names, (std::vector<std::string>{"head", "gpu-a"}));
    auto children = head_pipeline.process_ids();
    EXPECT_TRUE(children.contains("tp_tp0"));
    EXPECT_FALSE(children.contains("tp_tp1"));
    // Node 1 reports once its own start is done, which the head's start does not wait for.
    ASSERT_TRUE(eventually([&] { return nodes.node_processes().contains("tp_tp1"); }));
    EXPECT_EQ(nodes.node_status().node_name, "gpu-a");  // its /health says so

    for (int i = 0; i < 3; ++i) {
        auto result =
            head_pipeline.submit("two-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, expected[static_cast<std::size_t>(i)]) << i;
    }
    EXPECT_TRUE(head_pipeline.health().healthy) << head_pipeline.health().reason;
    const int old_rank0 = children.at("tp_tp0");
    const auto old_rank1 = nodes.node_processes().at("tp_tp1");

    // Node 1 leaves: the TP stage is down as a whole, naming the node; the head's rank is
    // stopped and held (no rank restarts alone); the other stage still runs.
    auto left = nodes.stop_node();
    ASSERT_TRUE(left.has_value()) << left.error().to_string();
    EXPECT_FALSE(process_alive(static_cast<int>(old_rank1)));
    ASSERT_TRUE(eventually([&] {
        return stage_in(head_pipeline, "tp", pipeline::StageState::restarting) &&
               !head_pipeline.process_ids().contains("tp_tp0");
    })) << head_pipeline.health().reason;
    EXPECT_FALSE(process_alive(old_rank0));
    auto health = head_pipeline.health();
    EXPECT_FALSE(health.healthy);
    const auto* tp = stage_health(health, "tp");
    ASSERT_NE(tp, nullptr);
    EXPECT_NE(tp->down_reason.find("node gpu-a (rank 1, 127.0.0.2) is missing"), std::string::npos)
        << tp->down_reason;
    EXPECT_TRUE(stage_in(head_pipeline, "last", pipeline::StageState::running));
    // Requests through it fail at once (the group's timeout is a minute), naming the node.
    const auto before = std::chrono::steady_clock::now();
    auto refused = head_pipeline.submit("down", OmniRequest{.inputs = Map{{"n", 1}}});
    ASSERT_FALSE(refused.has_value());
    EXPECT_LT(std::chrono::steady_clock::now() - before, milliseconds(10000));
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find("node gpu-a (rank 1, 127.0.0.2)"), std::string::npos)
        << refused.error().message;

    // Node 1 comes back (a new agent, as a restarted `omnirt serve`): it starts rank 1, the
    // hub starts the head's rank 0 afresh, and the stage serves again with a new group.
    nodes.start_node();
    ASSERT_TRUE(
        eventually([&] { return stage_in(head_pipeline, "tp", pipeline::StageState::running); },
                   milliseconds(60000)))
        << head_pipeline.health().reason;
    auto restarted = head_pipeline.process_ids();
    ASSERT_TRUE(restarted.contains("tp_tp0"));
    EXPECT_NE(restarted.at("tp_tp0"), old_rank0);
    for (int i = 0; i < 3; ++i) {
        auto result =
            head_pipeline.submit("back-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, expected[static_cast<std::size_t>(i)]) << i;
    }
    EXPECT_TRUE(head_pipeline.health().healthy) << head_pipeline.health().reason;

    // Clean stop: node 1 stops its stages when the head stops, nothing is left.
    const auto node_pids = nodes.node_processes();
    std::vector<int> head_pids;
    for (const auto& [name, pid] : head_pipeline.process_ids()) head_pids.push_back(pid);
    nodes.hub().stop(milliseconds(10000));
    auto node_status = nodes.stop_node();
    EXPECT_TRUE(node_status.has_value()) << node_status.error().to_string();
    for (const auto& [name, pid] : node_pids) {
        EXPECT_FALSE(process_alive(static_cast<int>(pid))) << name;
    }
    omnirt::testing::expect_nothing_left(head_pipeline, head_pids);
}

}  // namespace
}  // namespace omnirt::runner

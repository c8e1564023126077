// A pipeline over two nodes in one test process (docs/multi_node.md): the head (NodeHub +
// Pipeline::start with node addresses) on 127.0.0.1 and node 1 (run_node_agent) on 127.0.0.2,
// with tensors crossing the nodes through the tiered relay (ucx over tcp), shm within node 0 and
// same-process dispatch within node 1. Results must equal the one-node run.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "config/load.h"
#include "pipeline_harness.h"
#include "runner/builtins.h"
#include "runner/node_agent.h"
#include "runner/node_hub.h"
#include "support/command.h"

namespace omnirt::runner {
namespace {

using std::chrono::milliseconds;

bool port_free(const char* address, int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address, &addr.sin_addr);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

// A base port with the head's four endpoints and node 1's two free.
int free_base_port() {
    std::mt19937 random(static_cast<unsigned>(::getpid()) ^ std::random_device{}());
    for (int attempt = 0; attempt < 200; ++attempt) {
        int base = 20000 + static_cast<int>(random() % 4000) * 10;
        bool ok = port_free("127.0.0.2", base) && port_free("127.0.0.2", base + 1);
        for (int port = base; ok && port < base + 5; ++port) ok = port_free("127.0.0.1", port);
        if (ok) return base;
    }
    return 0;
}

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

// The head (this thread) and node 1 (run_node_agent on a thread of its own) of a pipeline over
// 127.0.0.1 and 127.0.0.2. On every way out (a failed ASSERT too) node 1 leaves and the hub
// stops.
class TwoNodes {
  public:
    ~TwoNodes() { release(); }

    // Creates the hub, starts node 1 and waits for it to join.
    Status join() {
        OMNI_TRY(hub_, NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0",
                                        .nnodes = 2,
                                        .head_address = "127.0.0.1",
                                        .heartbeat_interval = milliseconds(50),
                                        .node_timeout = milliseconds(2000)}));
        node_ = std::thread([this] {
            node_status_ = run_node_agent({.head_endpoint = hub_->endpoint(),
                                           .nnodes = 2,
                                           .node_rank = 1,
                                           .address = "127.0.0.2",
                                           .join_timeout = milliseconds(30000),
                                           .heartbeat_interval = milliseconds(50),
                                           .pipeline = {.binary = omnirt::testing::omnirt_binary(),
                                                        .heartbeat_interval = milliseconds(20)}},
                                          stop_node_);
        });
        OMNI_TRY(addresses_, hub_->wait_for_nodes(milliseconds(30000)));
        return ok_status();
    }

    // Starts the pipeline of `yaml` with node 0's process groups here.
    Result<std::unique_ptr<Pipeline>> start(const std::string& yaml) {
        OMNI_TRY(auto config, config::load_pipeline_text(yaml, "<two nodes>"));
        NodeHub* hub = hub_.get();
        return Pipeline::start(config, {.binary = omnirt::testing::omnirt_binary(),
                                        .heartbeat_interval = milliseconds(20),
                                        .node_addresses = addresses_,
                                        .on_coordinator_started =
                                            [hub](auto plan, pipeline::Coordinator& c) {
                                                return hub->serve_plan(std::move(plan), c);
                                            },
                                        .before_stop = [hub] { hub->stop(milliseconds(10000)); }});
    }

    // Node 1 leaves (as its `omnirt serve` does on SIGTERM): its stages stop; its agent's status.
    Status stop_node() {
        stop_node_ = true;
        if (node_.joinable()) node_.join();
        return node_status_;
    }

    NodeHub& hub() { return *hub_; }

  private:
    void release() {
        stop_node_ = true;
        if (node_.joinable()) node_.join();
        if (hub_) hub_->stop(milliseconds(0));
    }

    std::unique_ptr<NodeHub> hub_;
    std::vector<std::string> addresses_;
    std::atomic<bool> stop_node_{false};
    Status node_status_;
    std::thread node_;
};

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

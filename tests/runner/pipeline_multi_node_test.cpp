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
#include <functional>
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

    auto hub = NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0",
                                .nnodes = 2,
                                .head_address = "127.0.0.1",
                                .heartbeat_interval = milliseconds(50),
                                .node_timeout = milliseconds(2000)});
    ASSERT_TRUE(hub.has_value()) << hub.error().to_string();
    std::atomic<bool> stop_node{false};
    Status node_status;
    std::thread node;
    // On every way out (a failed ASSERT too): node 1 leaves, the hub stops.
    struct Guard {
        std::function<void()> release;
        ~Guard() { release(); }
    } guard{[&] {
        stop_node = true;
        if (node.joinable()) node.join();
        (*hub)->stop(milliseconds(0));
    }};
    node = std::thread([&] {
        node_status = run_node_agent({.head_endpoint = (*hub)->endpoint(),
                                      .nnodes = 2,
                                      .node_rank = 1,
                                      .address = "127.0.0.2",
                                      .join_timeout = milliseconds(30000),
                                      .heartbeat_interval = milliseconds(50),
                                      .pipeline = {.binary = omnirt::testing::omnirt_binary(),
                                                   .heartbeat_interval = milliseconds(20)}},
                                     stop_node);
    });
    auto addresses = (*hub)->wait_for_nodes(milliseconds(30000));
    ASSERT_TRUE(addresses.has_value()) << addresses.error().to_string();

    auto config = config::load_pipeline_text(pipeline_yaml(base_port, true), "<two nodes>");
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    NodeHub* raw_hub = hub->get();
    auto pipeline = Pipeline::start(
        *config, {.binary = omnirt::testing::omnirt_binary(),
                  .heartbeat_interval = milliseconds(20),
                  .node_addresses = *addresses,
                  .on_coordinator_started =
                      [raw_hub](auto plan, pipeline::Coordinator& c) {
                          return raw_hub->serve_plan(std::move(plan), c);
                      },
                  .before_stop = [raw_hub] { raw_hub->stop(milliseconds(10000)); }});
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
    (*hub)->stop(milliseconds(10000));
    (*pipeline)->stop();
    ASSERT_TRUE(node.joinable());
    node.join();
    EXPECT_TRUE(node_status.has_value()) << node_status.error().to_string();
    EXPECT_EQ(omnirt::testing::count_instance_segments(plan.runtime_dir), 0);
}

}  // namespace
}  // namespace omnirt::runner

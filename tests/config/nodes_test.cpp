// Node placement (docs/multi_node.md): the `node` field, its validation, and the plan of a
// pipeline on several nodes (endpoints on each node's address, relay tier per edge).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/load.h"
#include "config/render.h"
#include "config/runtime_plan.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

using testing::has_diagnostic;
using testing::load_report;
using testing::PipelineText;

TEST(Nodes, NodeFieldIsReadAndDefaultsToUnset) {
    auto p = PipelineText::linear().set("c", "node", "1");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_FALSE(report.config->stages[0].node.has_value());
    EXPECT_EQ(report.config->stages[2].node, 1);
}

TEST(Nodes, HostileNodeValuesAreDiagnosed) {
    struct Case {
        std::string value;
        std::string reason;
    };
    const Case cases[] = {
        {"-1", "node must be a node rank in 0..1023 (got -1)"},
        {"1024", "node must be a node rank in 0..1023 (got 1024)"},
        {"99999999999999999999", "node"},  // past int64: a YAML error, located
        {"4294967296", "integer 4294967296 is out of range"},
        {"\"one\"", "node"},
        {"1.5", "node"},
        {"[0, 1]", "node"},
        {"{rank: 1}", "node"},
        {"true", "node"},
    };
    for (const auto& c : cases) {
        auto p = PipelineText::linear().set("b", "node", c.value);
        auto report = load_report(p.text());
        EXPECT_FALSE(report.ok()) << c.value;
        EXPECT_TRUE(has_diagnostic(report, p.line("b", "node"), "b", "node", c.reason))
            << c.value << "\n"
            << testing::dump(report);
    }
}

TEST(Nodes, NullNodeMeansNodeZero) {
    auto p = PipelineText::linear().set("b", "node", "null");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_FALSE(report.config->stages[1].node.has_value());
}

TEST(Nodes, ProcessGroupStaysOnOneNode) {
    auto p = PipelineText::linear().set("b", "process", "pa").set("b", "node", "1");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "node"), "b", "node",
                               "shares process group 'pa' with stage 'a' on node 0, but is "
                               "placed on node 1"));
}

TEST(Nodes, FusedStagesStayOnOneNode) {
    auto p = PipelineText::linear().set("c", "node", "2").top("fused_stages", "[[b, c]]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "node"), "c", "node",
                               "a process group runs on one node"));
}

TEST(Nodes, C10dRelayDoesNotSpanNodes) {
    auto p = PipelineText::linear().set("c", "node", "1").top("relay_backend", "gloo");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.top_line("relay_backend"), "", "relay_backend",
                               "forms one process group on one node"));
}

PipelineConfig three_nodes() {
    // a (node 0) -> b (node 0, another process) -> c (node 1) -> d (node 1, c's process).
    auto p =
        PipelineText::linear()
            .set("c", "node", "1")
            .set("c", "next", "d")
            .erase("c", "terminal")
            .add_stage(
                "d",
                {{"process", "pc"}, {"factory", "test.d"}, {"terminal", "true"}, {"node", "1"}});
    auto report = load_report(p.text());
    EXPECT_TRUE(report.ok()) << testing::dump(report);
    return *report.config;
}

const Edge* find_edge(const RuntimePlan& plan, const std::string& from, const std::string& to) {
    for (const auto& e : plan.edges) {
        if (e.from == from && e.to == to) return &e;
    }
    return nullptr;
}

TEST(Nodes, PlanPutsEndpointsOnEachNodesAddress) {
    auto plan = prepare_runtime(three_nodes(),
                                {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    EXPECT_EQ(plan->scheme, EndpointScheme::tcp);  // several nodes: tcp whatever the config says
    EXPECT_EQ(plan->coordinator_endpoint, "tcp://10.0.0.1:17000");
    EXPECT_EQ(plan->abort_endpoint, "tcp://10.0.0.1:17001");
    EXPECT_EQ(plan->find_stage("a")->endpoint, "tcp://10.0.0.1:17002");
    EXPECT_EQ(plan->find_stage("b")->endpoint, "tcp://10.0.0.1:17003");
    // Node 1 counts its ports from base_port on its own address.
    EXPECT_EQ(plan->find_stage("c")->endpoint, "tcp://10.0.0.2:17000");
    EXPECT_EQ(plan->find_stage("d")->endpoint, "tcp://10.0.0.2:17001");
    EXPECT_EQ(plan->find_stage("c")->node, 1);
    EXPECT_EQ(plan->find_process("pc")->node, 1);
    EXPECT_EQ(plan->find_process("pa")->node, 0);
    EXPECT_EQ(plan->node_addresses, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
    EXPECT_EQ(plan->remote_relay_backend, "ucx");
}

TEST(Nodes, RelayTierPerEdge) {
    auto plan = prepare_runtime(three_nodes(),
                                {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    EXPECT_EQ(find_edge(*plan, "a", "b")->tier, "shm");    // one node, two processes
    EXPECT_EQ(find_edge(*plan, "b", "c")->tier, "ucx");    // across nodes
    EXPECT_EQ(find_edge(*plan, "c", "d")->tier, "local");  // one process
    EXPECT_TRUE(find_edge(*plan, "c", "d")->same_process);

    std::string text = render_plan(*plan, PlanFormat::text);
    EXPECT_NE(text.find("b --> c via ucx"), std::string::npos) << text;
    EXPECT_NE(text.find("a --> b via shm"), std::string::npos) << text;
    EXPECT_NE(text.find("node 1: 10.0.0.2"), std::string::npos) << text;
    EXPECT_NE(text.find("(between nodes: ucx)"), std::string::npos) << text;
    auto json = nlohmann::json::parse(render_plan(*plan, PlanFormat::json));
    EXPECT_EQ(json["nodes"], (nlohmann::json{"10.0.0.1", "10.0.0.2"}));
    EXPECT_EQ(json["edges"][1]["tier"], "ucx");
    EXPECT_EQ(json["stages"][2]["node"], 1);
    std::string mermaid = render_plan(*plan, PlanFormat::mermaid);
    EXPECT_NE(mermaid.find("b -- ucx --> c"), std::string::npos) << mermaid;
}

TEST(Nodes, ReplicasRunOnTheirStagesNode) {
    PipelineText p = PipelineText::linear().set("c", "node", "1").set("c", "replicas", "2");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    auto plan = prepare_runtime(*report.config,
                                {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    const StagePlan* c = plan->find_stage("c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->replicas, 2);
    ASSERT_EQ(c->replica_endpoints.size(), 2u);
    for (const std::string& endpoint : c->replica_endpoints) {
        EXPECT_EQ(endpoint.rfind("tcp://10.0.0.2:", 0), 0u) << endpoint;  // node 1's address
    }
    EXPECT_NE(c->replica_endpoints[0], c->replica_endpoints[1]);
    for (const std::string& name : c->processes) {
        ASSERT_NE(plan->find_process(name), nullptr) << name;
        EXPECT_EQ(plan->find_process(name)->node, 1) << name;
    }
    EXPECT_EQ(find_edge(*plan, "b", "c")->tier, "ucx");
}

TEST(Nodes, ReplicaNodesListPlacesEachReplica) {
    auto p = PipelineText::linear().set("b", "replicas", "3").set("b", "node", "[1, 0, 1]");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const StageConfig& b = report.config->stages[1];
    EXPECT_EQ(b.replica_nodes, (std::vector<int>{1, 0, 1}));
    EXPECT_EQ(b.node, 1);  // replica 0's
    EXPECT_EQ(b.node_of_replica(1), 0);
    // A one-entry list for a stage without replicas is the same as the rank alone.
    auto single = load_report(PipelineText::linear().set("c", "node", "[1]").text());
    ASSERT_TRUE(single.ok()) << testing::dump(single);
    EXPECT_EQ(single.config->stages[2].node, 1);
}

TEST(Nodes, HostileReplicaNodeListsAreDiagnosed) {
    struct Case {
        std::string replicas;
        std::string value;
        std::string field;
        std::string reason;
    };
    const Case cases[] = {
        {"2", "[]", "node", "node: [] names no node"},
        {"2", "[0, -1]", "node[1]", "node must be a node rank in 0..1023 (got -1)"},
        {"2", "[0, 1024]", "node[1]", "node must be a node rank in 0..1023 (got 1024)"},
        {"2", "[0, \"one\"]", "node[1]", "an integer"},
        {"2", "[0, 1.5]", "node[1]", "an integer"},
        {"2", "[0, [1]]", "node[1]", "an integer"},
        {"2", "[0, 4294967296]", "node[1]", "out of range"},
        {"2", "[0, 1, 1]", "node",
         "node lists 3 node ranks but the stage has replicas 2; give one node rank per replica"},
        {"3", "[0, 1]", "node", "node lists 2 node ranks but the stage has replicas 3"},
        {"1", "[0, 1]", "node", "node lists 2 node ranks but the stage has replicas 1"},
    };
    for (const auto& c : cases) {
        auto p = PipelineText::linear().set("b", "replicas", c.replicas).set("b", "node", c.value);
        auto report = load_report(p.text());
        EXPECT_FALSE(report.ok()) << c.value;
        EXPECT_TRUE(has_diagnostic(report, p.line("b", "node"), "b", c.field, c.reason))
            << c.value << "\n"
            << testing::dump(report);
    }
}

TEST(Nodes, TensorParallelRanksDoNotTakeANodeList) {
    auto p = PipelineText::linear()
                 .set("b", "tp_size", "2")
                 .set("b", "gpu", "[0, 1]")
                 .set("b", "node", "[0, 1]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("b", "node"), "b", "node",
                               "the ranks of a tensor-parallel stage (tp_size 2) run on one "
                               "node; a list of nodes places replicas, not TP ranks"))
        << testing::dump(report);
}

TEST(Nodes, FusedReplicasArePlacedAlike) {
    auto p = PipelineText::linear()
                 .top("fused_stages", "[[b, c]]")
                 .set("b", "replicas", "2")
                 .set("c", "replicas", "2")
                 .set("b", "node", "[0, 1]")
                 .set("c", "node", "[1, 0]");
    auto report = load_report(p.text());
    EXPECT_TRUE(has_diagnostic(report, p.line("c", "node"), "c", "node",
                               "whose replicas run on nodes 0, 1, but its own on nodes 1, 0; a "
                               "process group's replicas are placed alike"))
        << testing::dump(report);
    // Placed alike: valid.
    auto alike = PipelineText::linear()
                     .top("fused_stages", "[[b, c]]")
                     .set("b", "replicas", "2")
                     .set("c", "replicas", "2")
                     .set("b", "node", "[0, 1]")
                     .set("c", "node", "[0, 1]");
    auto valid = load_report(alike.text());
    EXPECT_TRUE(valid.ok()) << testing::dump(valid);
}

TEST(Nodes, ReplicasSpreadOverNodesInThePlan) {
    PipelineText p = PipelineText::linear().set("b", "replicas", "2").set("b", "node", "[0, 1]");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    auto plan = prepare_runtime(*report.config,
                                {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    const StagePlan* b = plan->find_stage("b");
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->replica_endpoints.size(), 2u);
    EXPECT_EQ(b->replica_endpoints[0].rfind("tcp://10.0.0.1:", 0), 0u) << b->replica_endpoints[0];
    EXPECT_EQ(b->replica_endpoints[1].rfind("tcp://10.0.0.2:", 0), 0u) << b->replica_endpoints[1];
    EXPECT_EQ(b->node, 0);
    EXPECT_EQ(plan->find_process("pb.r0")->node, 0);
    EXPECT_EQ(plan->find_process("pb.r1")->node, 1);
    EXPECT_EQ(replica_node(*plan, *b, 0), 0);
    EXPECT_EQ(replica_node(*plan, *b, 1), 1);
    // Each replica process has its own relay rank: a put names the chosen replica's.
    EXPECT_NE(replica_relay_rank(*plan, *b, 0), replica_relay_rank(*plan, *b, 1));
    EXPECT_EQ(replica_relay_rank(*plan, *b, 1), plan->find_process("pb.r1")->relay_rank);
    // a (node 0) reaches replica 0 through shm and replica 1 through ucx.
    EXPECT_EQ(find_edge(*plan, "a", "b")->tier, "shm+ucx");
    EXPECT_EQ(find_edge(*plan, "b", "c")->tier, "shm+ucx");
    std::string text = render_plan(*plan, PlanFormat::text);
    EXPECT_NE(text.find("2 replicas, nodes 0, 1"), std::string::npos) << text;
    // Every replica on node 1: ucx only.
    PipelineText far = PipelineText::linear().set("b", "replicas", "2").set("b", "node", "[1, 1]");
    auto far_report = load_report(far.text());
    ASSERT_TRUE(far_report.ok()) << testing::dump(far_report);
    auto far_plan = prepare_runtime(
        *far_report.config, {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_TRUE(far_plan.has_value());
    EXPECT_EQ(find_edge(*far_plan, "a", "b")->tier, "ucx");
    // A replica on a node the pipeline does not have is refused, naming the replica.
    auto beyond = load_report(
        PipelineText::linear().set("b", "replicas", "2").set("b", "node", "[0, 2]").text());
    ASSERT_TRUE(beyond.ok()) << testing::dump(beyond);
    auto refused = prepare_runtime(
        *beyond.config, {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().message.find("stage 'b' is placed on node 2 (replica 1), but the "
                                           "pipeline runs on 2 nodes (serve it with --nnodes 3"),
              std::string::npos)
        << refused.error().message;
}

TEST(Nodes, OneNodePlanHasNoRemoteTier) {
    auto config = three_nodes();
    for (auto& stage : config.stages) stage.node.reset();
    auto plan = prepare_runtime(config, {.runtime_dir = "/r"});
    ASSERT_TRUE(plan.has_value());
    EXPECT_TRUE(plan->node_addresses.empty());
    EXPECT_TRUE(plan->remote_relay_backend.empty());
    EXPECT_EQ(find_edge(*plan, "b", "c")->tier, "shm");
    EXPECT_EQ(plan->scheme, EndpointScheme::ipc);
}

TEST(Nodes, StageOnANodeBeyondTheCountIsRefused) {
    // One node (no addresses): a stage on node 1 cannot run.
    auto plan = prepare_runtime(three_nodes(), {.runtime_dir = "/r"});
    ASSERT_FALSE(plan.has_value());
    EXPECT_NE(plan.error().message.find("stage 'c' is placed on node 1, but the pipeline runs on "
                                        "1 node (serve it with --nnodes 2 or more)"),
              std::string::npos)
        << plan.error().message;
    auto config = three_nodes();
    config.stages[3].node = 5;
    plan = prepare_runtime(config, {.runtime_dir = "/r", .node_addresses = {"a", "b", "c"}});
    ASSERT_FALSE(plan.has_value());
    EXPECT_NE(plan.error().message.find("placed on node 5, but the pipeline runs on 3 nodes"),
              std::string::npos);
}

TEST(Nodes, SameGpuIsOnlyWithinANode) {
    auto config = three_nodes();
    config.stages[1].gpu = {0};
    config.stages[2].gpu = {0};
    config.stages[1].stream_to = {"c"};
    auto plan = prepare_runtime(config, {.runtime_dir = "/r", .node_addresses = {"x", "y"}});
    ASSERT_TRUE(plan.has_value());
    for (const auto& edge : plan->edges) {
        if (edge.from == "b" && edge.to == "c") EXPECT_FALSE(edge.same_gpu);
    }
    EXPECT_TRUE(plan->find_stage("b")->same_gpu_stream_targets.empty());
}

TEST(Nodes, Ipv6AddressesGoInBrackets) {
    auto plan = prepare_runtime(three_nodes(),
                                {.runtime_dir = "/r", .node_addresses = {"fd00::1", "fd00::2"}});
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->find_stage("c")->endpoint, "tcp://[fd00::2]:17000");
}

}  // namespace
}  // namespace omnirt::config

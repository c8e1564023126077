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
    EXPECT_EQ(b.node_list, (std::vector<int>{1, 0, 1}));
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
        {"2", "[0, \"one\"]", "node", "node mixes node ranks and node names"},
        {"2", "[0, -1]", "node[1]", "node must be a node rank in 0..1023 (got -1)"},
        {"2", "[0, 1024]", "node[1]", "node must be a node rank in 0..1023 (got 1024)"},
        {"2", "[0, 1.5]", "node[1]", "a node rank or a node name"},
        {"2", "[0, [1]]", "node[1]", "a node rank or a node name"},
        {"2", "[0, true]", "node[1]", "a node rank or a node name"},
        {"2", "[0, 4294967296]", "node[1]", "out of range"},
        {"2", "[0, 1, 1]", "node",
         "node lists 3 nodes but the stage has replicas 2; give one node per replica"},
        {"3", "[0, 1]", "node", "node lists 2 nodes but the stage has replicas 3"},
        {"1", "[0, 1]", "node", "node lists 2 nodes but the stage has replicas 1"},
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

TEST(Nodes, TensorParallelRanksTakeOneNodeEach) {
    auto p = PipelineText::linear()
                 .set("b", "tp_size", "2")
                 .set("b", "gpu", "[0, 0]")  // GPU 0 of each node: two devices
                 .set("b", "node", "[0, 1]");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const StageConfig& b = report.config->stages[1];
    EXPECT_EQ(b.node_list, (std::vector<int>{0, 1}));
    EXPECT_EQ(b.node, 0);  // rank 0's: the stage's IO and rendezvous
    EXPECT_EQ(b.node_of_tp_rank(1), 1);
    EXPECT_EQ(b.node_of_replica(0), 0);

    auto plan = prepare_runtime(*report.config,
                                {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    const ProcessPlan* rank0 = plan->find_process("pb_tp0");
    const ProcessPlan* rank1 = plan->find_process("pb_tp1");
    ASSERT_NE(rank0, nullptr);
    ASSERT_NE(rank1, nullptr);
    EXPECT_EQ(rank0->node, 0);
    EXPECT_EQ(rank1->node, 1);
    EXPECT_EQ(rank1->gpu, 0);
    // The stage's endpoint and the rendezvous on rank 0's node, rank 1's control endpoint on
    // its own node.
    EXPECT_EQ(plan->find_stage("b")->endpoint.rfind("tcp://10.0.0.1:", 0), 0u);
    EXPECT_EQ(rank0->tp->rendezvous.rfind("tcp://10.0.0.1:", 0), 0u);
    EXPECT_EQ(rank1->tp->rendezvous, rank0->tp->rendezvous);
    EXPECT_EQ(rank1->tp->endpoint, "tcp://10.0.0.2:17000");
    EXPECT_EQ(plan->nodes_of_stage(*plan->find_stage("b")), (std::vector<int>{0, 1}));
    // The edges of the stage leave from rank 0, on node 0.
    EXPECT_EQ(find_edge(*plan, "a", "b")->tier, "shm");
    std::string text = render_plan(*plan, PlanFormat::text);
    EXPECT_NE(text.find("tp 2, ranks on nodes 0, 1"), std::string::npos) << text;
    EXPECT_NE(text.find("pb_tp1: b (node 1)"), std::string::npos) << text;
    auto json = nlohmann::json::parse(render_plan(*plan, PlanFormat::json));
    EXPECT_EQ(json["processes"][2]["node"], 1) << json["processes"].dump();

    // One node: every rank on it, whatever the list says... once the count allows it.
    auto one = prepare_runtime(*report.config, {.runtime_dir = "/r"});
    ASSERT_FALSE(one.has_value());
    EXPECT_NE(one.error().message.find("stage 'b' is placed on node 1 (TP rank 1), but the "
                                       "pipeline runs on 1 node (serve it with --nnodes 2"),
              std::string::npos)
        << one.error().message;
}

TEST(Nodes, HostileTensorParallelNodeListsAreDiagnosed) {
    struct Case {
        std::string value;
        std::string field;
        std::string reason;
    };
    const Case cases[] = {
        {"[1]", "node", "node lists 1 node but the stage has tp_size 2; give one node per TP rank"},
        {"[0, 1, 1]", "node", "node lists 3 nodes but the stage has tp_size 2"},
        {"[0, -1]", "node[1]", "node must be a node rank in 0..1023 (got -1)"},
        {"[0, 1024]", "node[1]", "node must be a node rank in 0..1023 (got 1024)"},
    };
    for (const auto& c : cases) {
        auto p = PipelineText::linear().set("b", "tp_size", "2").set("b", "node", c.value);
        auto report = load_report(p.text());
        EXPECT_FALSE(report.ok()) << c.value;
        EXPECT_TRUE(has_diagnostic(report, p.line("b", "node"), "b", c.field, c.reason))
            << c.value << "\n"
            << testing::dump(report);
    }
    // Two ranks on one GPU of one node stay refused; the same id on two nodes is two devices.
    auto same = PipelineText::linear()
                    .set("b", "tp_size", "2")
                    .set("b", "gpu", "[3, 3]")
                    .set("b", "node", "[1, 1]");
    auto refused = load_report(same.text());
    EXPECT_TRUE(has_diagnostic(refused, 0, "b", "gpu[1]",
                               "GPU 3 of node 1 is listed twice; each TP rank needs its own GPU"))
        << testing::dump(refused);
    // Replicas of a TP stage stay refused, list or not.
    auto replicas = PipelineText::linear()
                        .set("b", "tp_size", "2")
                        .set("b", "replicas", "2")
                        .set("b", "node", "[0, 1]");
    auto replicas_report = load_report(replicas.text());
    EXPECT_TRUE(
        has_diagnostic(replicas_report, 0, "b", "replicas", "replicas of a tensor-parallel stage"))
        << testing::dump(replicas_report);
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

TEST(NodeNames, NamesResolveToRanks) {
    auto p = PipelineText::linear()
                 .top("nodes", "[head, gpu-a, gpu-b]")
                 .set("a", "node", "head")
                 .set("c", "node", "gpu-b")
                 .set("b", "replicas", "2")
                 .set("b", "node", "[gpu-a, head]");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    const PipelineConfig& config = *report.config;
    EXPECT_EQ(config.node_names, (std::vector<std::string>{"head", "gpu-a", "gpu-b"}));
    EXPECT_EQ(config.stages[0].node, 0);
    EXPECT_EQ(config.stages[2].node, 2);
    EXPECT_EQ(config.stages[1].node_list, (std::vector<int>{1, 0}));
    EXPECT_EQ(config.stages[1].node, 1);
    EXPECT_EQ(config.stages[1].node_names, (std::vector<std::string>{"gpu-a", "head"}));
    EXPECT_EQ(config.node_name(1), "gpu-a");
    EXPECT_EQ(config.node_name(7), "7");
    // Ranks still work beside `nodes:`.
    auto ranks = load_report(
        PipelineText::linear().top("nodes", "[head, gpu-a]").set("c", "node", "1").text());
    ASSERT_TRUE(ranks.ok()) << testing::dump(ranks);
    EXPECT_EQ(ranks.config->stages[2].node, 1);
    // A TP stage's ranks by name.
    auto tp = load_report(PipelineText::linear()
                              .top("nodes", "[head, gpu-a]")
                              .set("b", "tp_size", "2")
                              .set("b", "node", "[head, gpu-a]")
                              .text());
    ASSERT_TRUE(tp.ok()) << testing::dump(tp);
    EXPECT_EQ(tp.config->stages[1].node_list, (std::vector<int>{0, 1}));
    // --set takes a name too.
    auto overridden = load_report(
        PipelineText::linear().top("nodes", "[head, gpu-a]").text(),
        {.overrides = {"stages.c.node=gpu-a"}, .load_plugins = false, .check_registry = false});
    ASSERT_TRUE(overridden.ok()) << testing::dump(overridden);
    EXPECT_EQ(overridden.config->stages[2].node, 1);
}

TEST(NodeNames, HostileNodesListsAreDiagnosed) {
    struct Case {
        std::string value;
        std::string field;
        std::string reason;
    };
    const Case cases[] = {
        {"[head, head]", "nodes[1]", "node name 'head' is given twice"},
        {"[head, \"\"]", "nodes[1]", "a node name must not be empty"},
        {"[head, 7]", "nodes[1]", "expected a string"},
        {"[head, [a]]", "nodes[1]", "expected a string"},
        {"[head, \"12\"]", "nodes[1]", "node name '12' is a number"},
        {"[head, \"gpu a\"]", "nodes[1]", "has a character outside letters, digits"},
        {"[head, \"gpu/a\"]", "nodes[1]", "has a character outside letters, digits"},
        {"[]", "nodes", "nodes: [] names no node"},
        {"head", "nodes", "expected a list of strings"},
        {"{0: head}", "nodes", "expected a list of strings"},
    };
    for (const auto& c : cases) {
        auto p = PipelineText::linear().top("nodes", c.value);
        auto report = load_report(p.text());
        EXPECT_FALSE(report.ok()) << c.value;
        EXPECT_TRUE(has_diagnostic(report, p.top_line("nodes"), "", c.field, c.reason))
            << c.value << "\n"
            << testing::dump(report);
    }
    // A name of 64 characters is too long.
    auto long_name =
        load_report(PipelineText::linear().top("nodes", "[" + std::string(64, 'n') + "]").text());
    EXPECT_TRUE(has_diagnostic(long_name, 0, "", "nodes[0]", "is over 63 characters"))
        << testing::dump(long_name);
}

TEST(NodeNames, UnknownOrMixedNamesAreDiagnosed) {
    struct Case {
        std::string nodes;  // empty: no `nodes:`
        std::string replicas;
        std::string value;
        std::string field;
        std::string reason;
    };
    const Case cases[] = {
        {"[head, gpu-a]", "1", "gpu-b", "node", "node 'gpu-b' is not in nodes (head, gpu-a)"},
        {"[head, gpu-a]", "2", "[head, gpu-b]", "node[1]",
         "node 'gpu-b' is not in nodes (head, gpu-a)"},
        {"", "1", "gpu-a", "node",
         "node 'gpu-a' is a node name, but the pipeline has no `nodes:` list"},
        {"[head, gpu-a]", "2", "[head, 1]", "node", "node mixes node ranks and node names"},
        {"[head, gpu-a]", "2", "[1, head]", "node", "node mixes node ranks and node names"},
        {"[head, gpu-a]", "2", "[head, gpu-a, head]", "node",
         "node lists 3 nodes but the stage has replicas 2"},
        {"[head, gpu-a]", "1", "\"1\"", "node", "node '1' is not in nodes (head, gpu-a)"},
    };
    for (const auto& c : cases) {
        auto p = PipelineText::linear().set("b", "replicas", c.replicas).set("b", "node", c.value);
        if (!c.nodes.empty()) p.top("nodes", c.nodes);
        auto report = load_report(p.text());
        EXPECT_FALSE(report.ok()) << c.value;
        EXPECT_TRUE(has_diagnostic(report, p.line("b", "node"), "b", c.field, c.reason))
            << c.value << "\n"
            << testing::dump(report);
        EXPECT_FALSE(report.ok() && report.config->stages[1].node.has_value()) << c.value;
    }
}

TEST(NodeNames, TheNodeCountMustCoverTheNamesAndPlansSayTheNames) {
    auto p = PipelineText::linear().top("nodes", "[head, gpu-a]").set("c", "node", "gpu-a");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    auto plan = prepare_runtime(*report.config,
                                {.runtime_dir = "/r", .node_addresses = {"10.0.0.1", "10.0.0.2"}});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    EXPECT_EQ(plan->node_names, (std::vector<std::string>{"head", "gpu-a"}));
    EXPECT_EQ(plan->node_label(1), "node gpu-a (rank 1, 10.0.0.2)");
    EXPECT_EQ(plan->node_name(0), "head");
    EXPECT_EQ(node_label(3, "", {"head"}), "node 3");
    EXPECT_EQ(node_label(0, "", {"head"}), "node head (rank 0)");
    std::string text = render_plan(*plan, PlanFormat::text);
    EXPECT_NE(text.find("node 1 (gpu-a): 10.0.0.2"), std::string::npos) << text;
    EXPECT_NE(text.find("pc: c (node gpu-a)"), std::string::npos) << text;
    auto json = nlohmann::json::parse(render_plan(*plan, PlanFormat::json));
    EXPECT_EQ(json["node_names"], (nlohmann::json{"head", "gpu-a"}));

    // One node, two names: --nnodes 2 is needed, whatever the stages say.
    auto names_only = load_report(PipelineText::linear().top("nodes", "[head, gpu-a]").text());
    ASSERT_TRUE(names_only.ok()) << testing::dump(names_only);
    auto refused = prepare_runtime(*names_only.config, {.runtime_dir = "/r"});
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().message.find(
                  "nodes names 2 nodes, but the pipeline runs on 1 node (serve it with "
                  "--nnodes 2 or more)"),
              std::string::npos)
        << refused.error().message;
    // More names than nodes is refused even when every stage fits.
    auto config = *report.config;
    config.node_names.push_back("gpu-b");
    config.node_names.push_back("gpu-c");
    auto short_plan =
        prepare_runtime(config, {.runtime_dir = "/r", .node_addresses = {"a", "b", "c"}});
    ASSERT_FALSE(short_plan.has_value());
    EXPECT_NE(short_plan.error().message.find("nodes names 4 nodes"), std::string::npos)
        << short_plan.error().message;
}

}  // namespace
}  // namespace omnirt::config

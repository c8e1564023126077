// Stage replicas in the config: the `replicas` field, its validation (hostile values, what is
// not supported), and the plan runtime prep derives (one process per replica, endpoints).
#include <gtest/gtest.h>

#include "config/load.h"
#include "config/render.h"
#include "config/runtime_plan.h"
#include "pipeline_text.h"

namespace omnirt::config {
namespace {

using testing::has_diagnostic;
using testing::load_report;
using testing::PipelineText;

TEST(Replicas, DefaultIsOneAndAValidCountIsRead) {
    auto plain = load_report(PipelineText::linear().text());
    ASSERT_TRUE(plain.ok()) << testing::dump(plain);
    EXPECT_EQ(plain.config->stages[1].replicas, 1);
    auto p = PipelineText::linear().set("b", "replicas", "3");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    EXPECT_EQ(report.config->stages[1].replicas, 3);
}

TEST(Replicas, HostileValuesAreErrors) {
    for (const std::string value : {"0", "-1", "65", "1000000"}) {
        auto p = PipelineText::linear().set("b", "replicas", value);
        auto report = load_report(p.text());
        EXPECT_TRUE(has_diagnostic(report, p.line("b", "replicas"), "b", "replicas",
                                   "'replicas' must be in 1..64, got " + value))
            << value;
    }
    // An out-of-range count is reported once, not again as a disagreement within its group.
    auto grouped = PipelineText::linear().set("c", "process", "pb").set("b", "replicas", "0");
    auto grouped_report = load_report(grouped.text());
    EXPECT_EQ(grouped_report.diagnostics.size(), 1u) << testing::dump(grouped_report);
    auto huge = PipelineText::linear().set("b", "replicas", "99999999999999999999");
    EXPECT_FALSE(load_report(huge.text()).ok());
    auto wide = PipelineText::linear().set("b", "replicas", "4294967297");
    EXPECT_TRUE(has_diagnostic(load_report(wide.text()), wide.line("b", "replicas"), "b",
                               "replicas", "out of range"));
    for (const std::string value : {"two", "1.5", "[2]", "true"}) {
        auto p = PipelineText::linear().set("b", "replicas", value);
        auto report = load_report(p.text());
        EXPECT_TRUE(has_diagnostic(report, p.line("b", "replicas"), "b", "replicas", "integer"))
            << value;
    }
}

TEST(Replicas, TensorParallelGpuAndFixedRelayWorldsAreRejected) {
    auto tp = PipelineText::linear()
                  .erase("b", "process")
                  .set("b", "tp_size", "2")
                  .set("b", "replicas", "2");
    EXPECT_TRUE(
        has_diagnostic(load_report(tp.text()), tp.line("b", "replicas"), "b", "replicas",
                       "replicas of a tensor-parallel stage (tp_size 2) are not supported"));
    auto gpu = PipelineText::linear().set("b", "gpu", "0").set("b", "replicas", "2");
    EXPECT_TRUE(has_diagnostic(load_report(gpu.text()), gpu.line("b", "replicas"), "b", "replicas",
                               "replicas of a GPU stage are not supported yet"));
    auto gloo = PipelineText::linear().top("relay_backend", "gloo").set("b", "replicas", "2");
    EXPECT_TRUE(has_diagnostic(load_report(gloo.text()), gloo.line("b", "replicas"), "b",
                               "replicas", "relay_backend 'gloo' has a fixed world"));
}

TEST(Replicas, StagesOfOneProcessGroupMustAgree) {
    auto p = PipelineText::linear().set("c", "process", "pb").set("b", "replicas", "2");
    EXPECT_TRUE(has_diagnostic(load_report(p.text()), p.line("c", "name"), "c", "replicas",
                               "stage 'c' has replicas 1 but stage 'b' in the same process group "
                               "'pb' has 2"));
    // Fusion merges groups: the fused stages must agree too.
    auto fused = PipelineText::linear().top("fused_stages", "[[a, b]]").set("b", "replicas", "2");
    EXPECT_TRUE(has_diagnostic(load_report(fused.text()), fused.line("b", "replicas"), "b",
                               "replicas", "in the same process group 'pa'"));
    auto agreed = PipelineText::linear()
                      .set("c", "process", "pb")
                      .set("b", "replicas", "2")
                      .set("c", "replicas", "2");
    EXPECT_TRUE(load_report(agreed.text()).ok());
}

TEST(Replicas, NamesTheReplicasWouldTakeMustBeFree) {
    // Replica 1 of process 'pb' is process 'pb.r1'; of stage 'b', stage instance 'b.r1'.
    auto process = PipelineText::linear().set("c", "process", "pb.r1").set("b", "replicas", "2");
    EXPECT_TRUE(has_diagnostic(load_report(process.text()), process.line("b", "replicas"), "b",
                               "replicas", "replica 1 of 'pb' is named 'pb.r1'"));
    auto stage = PipelineText::linear().add_stage(
        "b.r0", {{"process", "px"}, {"factory", "test.x"}, {"terminal", "true"}});
    stage.set("b", "replicas", "2");
    EXPECT_TRUE(has_diagnostic(load_report(stage.text()), stage.line("b", "replicas"), "b",
                               "replicas", "replica 0 of 'b' is named 'b.r0'"));
}

TEST(Replicas, RuntimePrepRunsOneProcessPerReplicaWithItsOwnEndpoint) {
    auto p = PipelineText::linear()
                 .set("b", "replicas", "3")
                 .set("c", "process", "pb")
                 .set("c", "replicas", "3");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    auto plan = prepare_runtime(*report.config, {.runtime_dir = "/run/x/omnirt-abc"});
    ASSERT_TRUE(plan.has_value()) << plan.error().message;
    ASSERT_EQ(plan->processes.size(), 4u);  // pa, pb.r0, pb.r1, pb.r2
    EXPECT_EQ(plan->processes[0].name, "pa");
    EXPECT_EQ(plan->processes[0].replicas, 1);
    for (int k = 0; k < 3; ++k) {
        const ProcessPlan& process = plan->processes[static_cast<std::size_t>(k) + 1];
        EXPECT_EQ(process.name, "pb.r" + std::to_string(k));
        EXPECT_EQ(process.replica, k);
        EXPECT_EQ(process.replicas, 3);
        EXPECT_EQ(process.stages, (std::vector<std::string>{"b", "c"}));
        EXPECT_EQ(stage_instance("b", process), "b.r" + std::to_string(k));
    }
    EXPECT_EQ(stage_instance("a", plan->processes[0]), "a");
    const StagePlan* b = plan->find_stage("b");
    EXPECT_EQ(b->replicas, 3);
    EXPECT_EQ(b->process, "pb.r0");
    EXPECT_EQ(b->processes, (std::vector<std::string>{"pb.r0", "pb.r1", "pb.r2"}));
    EXPECT_EQ(b->replica_endpoints,
              (std::vector<std::string>{"ipc:///run/x/omnirt-abc/stage-b.sock",
                                        "ipc:///run/x/omnirt-abc/stage-b.r1.sock",
                                        "ipc:///run/x/omnirt-abc/stage-b.r2.sock"}));
    EXPECT_EQ(b->endpoint, b->replica_endpoints[0]);
    EXPECT_TRUE(plan->find_stage("a")->replica_endpoints.empty());
    EXPECT_EQ(plan->stage_instances(), 7u);  // a + 3 b + 3 c
    // Inside a replica, b -> c stays a same-process hand-off.
    bool same_process = false;
    for (const auto& edge : plan->edges) {
        if (edge.from == "b" && edge.to == "c") same_process = edge.same_process;
    }
    EXPECT_TRUE(same_process);
    // The topology shows the replicas.
    std::string text = render_plan(*plan, PlanFormat::text);
    EXPECT_NE(text.find("pb.r1: b, c (replica 1 of 3)"), std::string::npos) << text;
    EXPECT_NE(text.find("process pb.r0, pb.r1, pb.r2, cpu, 3 replicas"), std::string::npos) << text;
}

TEST(Replicas, TcpReplicaPortsComeAfterEveryOtherPort) {
    auto p = PipelineText::linear()
                 .set("b", "replicas", "2")
                 .top("endpoints", "{scheme: tcp, base_port: 20000}");
    auto report = load_report(p.text());
    ASSERT_TRUE(report.ok()) << testing::dump(report);
    auto plan = prepare_runtime(*report.config, {.runtime_dir = "/run/x/omnirt-abc"});
    ASSERT_TRUE(plan.has_value()) << plan.error().message;
    // coordinator 20000, abort 20001, a 20002, b 20003, c 20004: as without replicas.
    EXPECT_EQ(plan->find_stage("c")->endpoint, "tcp://127.0.0.1:20004");
    EXPECT_EQ(plan->find_stage("b")->replica_endpoints,
              (std::vector<std::string>{"tcp://127.0.0.1:20003", "tcp://127.0.0.1:20005"}));
}

}  // namespace
}  // namespace omnirt::config

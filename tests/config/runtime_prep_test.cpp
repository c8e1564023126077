#include <gtest/gtest.h>

#include <sys/stat.h>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "config/process_groups.h"
#include "config/render.h"
#include "config/runtime_dir.h"
#include "config/runtime_plan.h"

namespace omnirt::config {
namespace {

StageConfig stage(std::string name, std::string process, std::vector<std::string> next = {}) {
    StageConfig s;
    s.name = std::move(name);
    s.factory = "test.identity";
    s.process = std::move(process);
    s.next = std::move(next);
    s.terminal = s.next.empty();
    return s;
}

PipelineConfig linear_pipeline() {
    PipelineConfig config;
    config.model_path = "/models/m";
    config.stages = {stage("a", "p1", {"b"}), stage("b", "p2", {"c"}), stage("c", "p3")};
    return config;
}

const Edge* find_edge(const RuntimePlan& plan, const std::string& from, const std::string& to,
                      EdgeKind kind) {
    for (const auto& e : plan.edges) {
        if (e.from == from && e.to == to && e.kind == kind) return &e;
    }
    return nullptr;
}

TEST(RuntimePrep, DerivesEntryTerminalsAndIpcEndpoints) {
    PipelineConfig config = linear_pipeline();
    auto plan = prepare_runtime(config, {.runtime_dir = "/run/x/omnirt-abc"});
    ASSERT_TRUE(plan.has_value()) << plan.error().message;
    EXPECT_EQ(plan->name, "/models/m");
    EXPECT_EQ(plan->entry_stage, "a");
    EXPECT_EQ(plan->terminal_stages, std::vector<std::string>{"c"});
    EXPECT_EQ(plan->coordinator_endpoint, "ipc:///run/x/omnirt-abc/coordinator.sock");
    EXPECT_EQ(plan->abort_endpoint, "ipc:///run/x/omnirt-abc/abort.sock");
    EXPECT_EQ(plan->find_stage("b")->endpoint, "ipc:///run/x/omnirt-abc/stage-b.sock");
    ASSERT_EQ(plan->processes.size(), 3u);
    EXPECT_EQ(plan->processes[1].name, "p2");
    // One relay rank per process, world = 3; shm keeps buffers on the CPU.
    EXPECT_EQ(plan->find_stage("c")->relay.rank, 2);
    EXPECT_EQ(plan->find_stage("c")->relay.world_size, 3);
    EXPECT_EQ(plan->find_stage("c")->relay.device, "cpu");
    EXPECT_EQ(plan->find_stage("c")->relay.credits, kDefaultCredits);
    ASSERT_NE(find_edge(*plan, "a", "b", EdgeKind::normal), nullptr);
    EXPECT_FALSE(find_edge(*plan, "a", "b", EdgeKind::normal)->same_process);
}

TEST(RuntimePrep, LongRuntimeDirFallsBackToShortNamesThenFails) {
    PipelineConfig config = linear_pipeline();
    config.stages[1].name = std::string(60, 'n');
    config.stages[0].next = {config.stages[1].name};
    std::string dir = "/tmp/" + std::string(40, 'd');
    auto plan = prepare_runtime(config, {.runtime_dir = dir});
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->stages[1].endpoint, "ipc://" + dir + "/s1.sock");
    auto too_long = prepare_runtime(config, {.runtime_dir = "/tmp/" + std::string(120, 'd')});
    ASSERT_FALSE(too_long.has_value());
    EXPECT_NE(too_long.error().message.find("set endpoints.base_path"), std::string::npos);
}

TEST(RuntimePrep, TcpEndpointsComeFromTheBasePort) {
    PipelineConfig config = linear_pipeline();
    config.endpoints = {.scheme = EndpointScheme::tcp, .host = "10.0.0.5", .base_port = 20000};
    config.stages[1].tp_size = 2;
    config.stages[1].process.reset();
    auto plan = prepare_runtime(config);
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->coordinator_endpoint, "tcp://10.0.0.5:20000");
    EXPECT_EQ(plan->abort_endpoint, "tcp://10.0.0.5:20001");
    EXPECT_EQ(plan->stages[0].endpoint, "tcp://10.0.0.5:20002");
    EXPECT_EQ(plan->stages[1].endpoint, "tcp://10.0.0.5:20003");
    // The TP stage's rendezvous takes the port after its endpoint.
    EXPECT_EQ(plan->find_process("b_tp1")->tp->rendezvous, "tcp://10.0.0.5:20004");
    // Then one port per follower rank for rank 0's fan-out.
    EXPECT_EQ(plan->find_process("b_tp0")->tp->endpoint, "");
    EXPECT_EQ(plan->find_process("b_tp1")->tp->endpoint, "tcp://10.0.0.5:20005");
    EXPECT_EQ(plan->stages[2].endpoint, "tcp://10.0.0.5:20006");

    config.endpoints.base_port = 65534;
    auto overflow = prepare_runtime(config);
    ASSERT_FALSE(overflow.has_value());
    EXPECT_NE(overflow.error().message.find("too few ports"), std::string::npos);
}

TEST(RuntimePrep, TensorParallelStageGetsOneProcessPerRank) {
    PipelineConfig config = linear_pipeline();
    StageConfig& tp = config.stages[1];
    tp.process = "thinker";
    tp.tp_size = 2;
    tp.gpu = {2, 3};
    tp.gpu_is_list = true;
    auto plan = prepare_runtime(config, {.runtime_dir = "/r"});
    ASSERT_TRUE(plan.has_value());
    const StagePlan* b = plan->find_stage("b");
    EXPECT_EQ(b->process, "thinker_tp0");
    EXPECT_EQ(b->processes, (std::vector<std::string>{"thinker_tp0", "thinker_tp1"}));
    const ProcessPlan* rank1 = plan->find_process("thinker_tp1");
    ASSERT_NE(rank1, nullptr);
    EXPECT_EQ(rank1->gpu, 3);
    EXPECT_EQ(rank1->tp->rank, 1);
    EXPECT_EQ(rank1->tp->size, 2);
    EXPECT_EQ(rank1->tp->rendezvous, "file:///r/tp-b.store");
    EXPECT_EQ(rank1->tp->endpoint, "ipc:///r/tp-b-1.sock");
    // Followers have no relay rank; the world counts p1, thinker_tp0, p3.
    EXPECT_EQ(rank1->relay_rank, -1);
    EXPECT_EQ(b->relay.rank, 1);
    EXPECT_EQ(b->relay.world_size, 3);
}

TEST(RuntimePrep, FusionMergesProcessGroupsAndMarksLocalEdges) {
    PipelineConfig config = linear_pipeline();
    config.stages.push_back(stage("d", "p1"));  // shares p1 with a
    config.stages[2].terminal = false;
    config.stages[2].next = {"d"};
    config.fused_stages = {{"b", "c"}};
    config.stages[0].stream_to = {"d"};
    auto groups = process_group_of_stages(config);
    EXPECT_EQ(groups["b"], "p2");
    EXPECT_EQ(groups["c"], "p2");
    EXPECT_EQ(groups["d"], "p1");
    auto plan = prepare_runtime(config, {.runtime_dir = "/r"});
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->processes.size(), 2u);
    EXPECT_TRUE(find_edge(*plan, "b", "c", EdgeKind::normal)->same_process);
    EXPECT_EQ(plan->find_stage("b")->local_targets, std::vector<std::string>{"c"});
    EXPECT_TRUE(find_edge(*plan, "a", "d", EdgeKind::stream)->same_process);
    EXPECT_EQ(plan->find_stage("a")->local_stream_targets, std::vector<std::string>{"d"});
    EXPECT_EQ(plan->find_stage("d")->stream_sources, std::vector<std::string>{"a"});
}

TEST(RuntimePrep, FusionAcrossTwoNamedProcessesKeepsTheFirstName) {
    PipelineConfig config = linear_pipeline();
    config.fused_stages = {{"a", "b"}, {"b", "c"}};
    auto groups = process_group_of_stages(config);
    EXPECT_EQ(groups["a"], "p1");
    EXPECT_EQ(groups["b"], "p1");
    EXPECT_EQ(groups["c"], "p1");
}

TEST(RuntimePrep, SameGpuStreamEdgesAndRelayDevice) {
    PipelineConfig config = linear_pipeline();
    config.relay_backend = "nccl";
    config.stages[0].gpu = {1};
    config.stages[1].gpu = {1};
    config.stages[2].gpu = {0};
    config.stages[0].stream_to = {"b", "c"};
    auto plan = prepare_runtime(config, {.runtime_dir = "/r"});
    ASSERT_TRUE(plan.has_value());
    EXPECT_TRUE(find_edge(*plan, "a", "b", EdgeKind::stream)->same_gpu);
    EXPECT_FALSE(find_edge(*plan, "a", "c", EdgeKind::stream)->same_gpu);
    EXPECT_EQ(plan->find_stage("a")->same_gpu_stream_targets, std::vector<std::string>{"b"});
    EXPECT_EQ(plan->find_stage("a")->relay.device, "cuda:1");
    // An explicit relay device wins over inference.
    config.stages[2].relay = RelayConfig{.rank = 7, .device = "cpu"};
    plan = prepare_runtime(config, {.runtime_dir = "/r"});
    EXPECT_EQ(plan->find_stage("c")->relay.device, "cpu");
    EXPECT_EQ(plan->find_stage("c")->relay.rank, 7);
}

TEST(RuntimePrep, OverridesMergeAndInjectedArgs) {
    Registry registry;
    ASSERT_TRUE(registry
                    .add(FunctionKind::factory, "test.identity",
                         {.callable = 0, .injectable_args = {"model_path", "gpu_id"}})
                    .has_value());
    PipelineConfig config = linear_pipeline();
    config.stages[0].factory_args = Map{{"a", 1}, {"nested", Map{{"x", 1}, {"y", 2}}}};
    config.stages[0].gpu = {4};
    config.runtime_overrides["a"] = Map{{"a", 2}, {"nested", Map{{"y", 3}}}};
    config.stages[1].factory_args = Map{{"model_path", "/explicit"}};
    auto plan = prepare_runtime(config, {.runtime_dir = "/r", .registry = &registry});
    ASSERT_TRUE(plan.has_value());
    const Map& a = plan->stages[0].factory_args;
    EXPECT_EQ(a.at("a"), Value(2));
    EXPECT_EQ(a.at("nested"), Value(Map{{"x", 1}, {"y", 3}}));
    EXPECT_EQ(a.at("model_path"), Value("/models/m"));
    EXPECT_EQ(a.at("gpu_id"), Value(4));
    // Set explicitly: not replaced. CPU stage: no gpu_id.
    EXPECT_EQ(plan->stages[1].factory_args.at("model_path"), Value("/explicit"));
    EXPECT_FALSE(plan->stages[1].factory_args.contains("gpu_id"));
    // A factory that does not declare them gets nothing injected.
    config.stages[2].factory = "other";
    plan = prepare_runtime(config, {.runtime_dir = "/r", .registry = &registry});
    EXPECT_FALSE(plan->stages[2].factory_args.contains("model_path"));
}

TEST(RuntimePrep, RenderFormats) {
    PipelineConfig config = linear_pipeline();
    config.stages[0].stream_to = {"c"};
    auto plan = prepare_runtime(config, {.runtime_dir = "/r"});
    ASSERT_TRUE(plan.has_value());
    auto json = nlohmann::json::parse(render_plan(*plan, PlanFormat::json));
    EXPECT_EQ(json["stages"].size(), 3u);
    EXPECT_EQ(json["entry_stage"], "a");
    EXPECT_EQ(json["edges"].size(), 3u);
    EXPECT_EQ(json["edges"][1]["kind"], "stream");
    std::string mermaid = render_plan(*plan, PlanFormat::mermaid);
    EXPECT_NE(mermaid.find("a -. stream shm .-> c"), std::string::npos) << mermaid;
    EXPECT_NE(mermaid.find("c ==> coordinator"), std::string::npos);
    std::string text = render_plan(*plan, PlanFormat::text);
    EXPECT_NE(text.find("a ~~> c (stream)"), std::string::npos);
    EXPECT_FALSE(parse_plan_format("yaml").has_value());
}

TEST(RuntimeDirectory, PrivateAndRemoved) {
    std::string path;
    {
        auto dir = RuntimeDirectory::create(::testing::TempDir());
        ASSERT_TRUE(dir.has_value()) << dir.error().message;
        path = (*dir)->path();
        struct stat st {};
        ASSERT_EQ(stat(path.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0700u);
        std::FILE* f = std::fopen((path + "/x.sock").c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fclose(f);
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    auto bad = RuntimeDirectory::create("/nonexistent/dir");
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().message.find("/nonexistent/dir"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::config

namespace omnirt::config {
namespace {

TEST(RuntimePrep, C10dRelaysGetARendezvousAndOneStagePerProcess) {
    PipelineConfig config = linear_pipeline();
    config.relay_backend = "gloo";
    auto plan = prepare_runtime(config, {.runtime_dir = "/r"});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    EXPECT_EQ(plan->relay_rendezvous, "file:///r/relay.store");
    config.relay_backend = "shm";
    EXPECT_EQ(prepare_runtime(config, {.runtime_dir = "/r"})->relay_rendezvous, "");

    config.relay_backend = "gloo";
    config.stages[1].process = config.stages[0].process;  // a and b share a process
    auto shared = prepare_runtime(config, {.runtime_dir = "/r"});
    ASSERT_FALSE(shared.has_value());
    EXPECT_EQ(shared.error().code, ErrorCode::unimplemented);
    EXPECT_NE(shared.error().message.find("one stage per process"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::config

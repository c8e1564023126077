// Self-healing of a tensor-parallel stage on one node: its ranks are one group for the
// supervisor. When any rank dies every rank is stopped and started again on a fresh rendezvous
// (a c10d group cannot take in one new rank), the restart counts once in the stage's budget, and
// the new group all-reduces with the same results (test.tp_all_reduce,
// tests/runner/tp_all_reduce_plugin.cpp). With the budget spent the stage fails for good.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "pipeline_harness.h"
#include "runner/builtins.h"
#include "tp_all_reduce.h"
#include "two_nodes.h"

namespace omnirt::runner {
namespace {

using omnirt::testing::eventually;
using omnirt::testing::two_rank_sum;
using std::chrono::milliseconds;

constexpr milliseconds kHangGuard(60000);

struct Case {
    bool tcp = false;  // the rendezvous: rank 0's TCP store, or a file store
    int victim = 0;    // the rank killed
    std::string name;
};

std::string tp_yaml(bool tcp, int max_restarts) {
    std::string endpoints;
    if (tcp) {
        const int base_port = omnirt::testing::free_base_port();
        EXPECT_GT(base_port, 0);
        endpoints = "endpoints: {scheme: tcp, base_port: " + std::to_string(base_port) + "}\n";
    }
    return std::string(R"(
model_path: none
relay_backend: shm
plugins: [")" OMNIRT_TP_PLUGIN_PATH R"("]
restart: {max_restarts: )") +
           std::to_string(max_restarts) +
           R"(, window_s: 600, backoff_initial_ms: 10, backoff_max_ms: 100}
)" + endpoints +
           R"(stages:
  - {name: tp, factory: test.tp_all_reduce, tp_size: 2, next: last}
  - {name: last, process: last, factory: test.identity, terminal: true}
)";
}

pipeline::StageHealth tp_health(Pipeline& target) {
    for (const auto& entry : target.health().stages) {
        if (entry.stage == "tp") return entry;
    }
    ADD_FAILURE() << "no stage 'tp' in the health report";
    return {};
}

void expect_sums(Pipeline& target, const std::string& prefix) {
    for (int i = 0; i < 3; ++i) {
        auto result =
            target.submit(prefix + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, two_rank_sum(i)) << prefix << i;
    }
}

// Both ranks run, neither is one of `old`, and the stage is serving.
bool group_replaced(Pipeline& target, const std::map<std::string, int>& old) {
    auto now = target.process_ids();
    for (const char* rank : {"tp_tp0", "tp_tp1"}) {
        if (!now.contains(rank) || now.at(rank) == old.at(rank)) return false;
    }
    const auto health = tp_health(target);
    return health.state == pipeline::StageState::running && health.alive;
}

std::string store_path(Pipeline& target) {
    const std::string rendezvous = target.plan().find_process("tp_tp0")->tp->rendezvous;
    return rendezvous.starts_with("file://") ? rendezvous.substr(7) : std::string();
}

class PipelineTpRestart : public ::testing::TestWithParam<Case> {
  protected:
    void SetUp() override {
        ASSERT_TRUE(enable_test_stages().has_value());
        ASSERT_TRUE(register_builtins().has_value());
    }
};

TEST_P(PipelineTpRestart, AKilledRankRestartsTheWholeGroupWhichServesTheSameResults) {
    const Case& c = GetParam();
    auto started =
        omnirt::testing::start_pipeline(tp_yaml(c.tcp, 3), {.placement = Placement::processes});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    Pipeline& target = **started;
    EXPECT_EQ(store_path(target).empty(), c.tcp);
    expect_sums(target, "first-");
    if (!c.tcp) {
        EXPECT_TRUE(std::filesystem::exists(store_path(target)));
    }
    const auto old = target.process_ids();
    const std::string victim = "tp_tp" + std::to_string(c.victim);
    const std::string other = "tp_tp" + std::to_string(1 - c.victim);

    ASSERT_EQ(::kill(old.at(victim), SIGKILL), 0);
    // Every rank is replaced, the surviving one too; the other stage keeps its process.
    ASSERT_TRUE(eventually([&] { return group_replaced(target, old); }, kHangGuard))
        << target.health().reason;
    EXPECT_FALSE(omnirt::testing::process_alive(old.at(victim)));
    EXPECT_FALSE(omnirt::testing::process_alive(old.at(other)));
    EXPECT_EQ(target.process_ids().at("last"), old.at("last"));
    EXPECT_EQ(tp_health(target).restarts, 1);  // one restart of the group, not one per rank

    expect_sums(target, "after-");
    EXPECT_TRUE(target.health().healthy) << target.health().reason;

    std::vector<int> pids;
    for (const auto& [name, pid] : old) pids.push_back(pid);
    for (const auto& [name, pid] : target.process_ids()) pids.push_back(pid);
    omnirt::testing::expect_nothing_left(target, pids);
}

TEST_P(PipelineTpRestart, ARankThatKeepsDyingSpendsTheStagesBudgetAndTheStageFailsForGood) {
    const Case& c = GetParam();
    auto started =
        omnirt::testing::start_pipeline(tp_yaml(c.tcp, 1), {.placement = Placement::processes});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    Pipeline& target = **started;
    expect_sums(target, "first-");
    const std::string victim = "tp_tp" + std::to_string(c.victim);
    std::vector<int> pids;

    const auto first = target.process_ids();
    for (const auto& [name, pid] : first) pids.push_back(pid);
    ASSERT_EQ(::kill(first.at(victim), SIGKILL), 0);
    ASSERT_TRUE(eventually([&] { return group_replaced(target, first); }, kHangGuard))
        << target.health().reason;
    expect_sums(target, "second-");

    // The second death is past max_restarts 1: the stage fails for good, saying why.
    const auto second = target.process_ids();
    for (const auto& [name, pid] : second) pids.push_back(pid);
    ASSERT_EQ(::kill(second.at(victim), SIGKILL), 0);
    ASSERT_TRUE(eventually([&] { return tp_health(target).state == pipeline::StageState::failed; },
                           kHangGuard));
    const auto health = tp_health(target);
    EXPECT_NE(health.down_reason.find("restarted 1 times within 600 s"), std::string::npos)
        << health.down_reason;
    EXPECT_NE(health.down_reason.find("'" + victim + "'"), std::string::npos) << health.down_reason;
    EXPECT_FALSE(target.health().healthy);
    // The surviving rank is stopped too: it cannot serve alone, and holds what a model holds.
    const std::string other = "tp_tp" + std::to_string(1 - c.victim);
    EXPECT_TRUE(eventually([&] { return !target.process_ids().contains(other); }, kHangGuard));
    EXPECT_FALSE(omnirt::testing::process_alive(second.at(other)));
    // Requests fail at once with that reason (not after the group's one-minute timeout).
    const auto before = std::chrono::steady_clock::now();
    auto refused = target.submit("refused", OmniRequest{.inputs = Map{{"n", 1}}});
    ASSERT_FALSE(refused.has_value());
    EXPECT_LT(std::chrono::steady_clock::now() - before, milliseconds(10000));
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable) << refused.error().to_string();
    EXPECT_NE(refused.error().message.find("restarted 1 times"), std::string::npos)
        << refused.error().message;

    omnirt::testing::expect_nothing_left(target, pids);
}

INSTANTIATE_TEST_SUITE_P(Rendezvous, PipelineTpRestart,
                         ::testing::Values(Case{false, 1, "FileStoreFollowerKilled"},
                                           Case{false, 0, "FileStoreRankZeroKilled"},
                                           Case{true, 1, "TcpStoreFollowerKilled"},
                                           Case{true, 0, "TcpStoreRankZeroKilled"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace omnirt::runner

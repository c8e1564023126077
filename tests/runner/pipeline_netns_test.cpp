// Tensors between two nodes in two network namespaces (label netns; docs/multi_node.md): this
// test process enters namespace 0 (10.77.1.1) and runs the head (NodeHub + Pipeline::start);
// `omnirt serve --node-rank 1` runs in namespace 1 (10.77.1.2), the two joined by a veth pair.
// Across namespaces the ucx relay takes its network path (UCX_TLS=tcp: ucp_get_nbx over TCP),
// and the results must equal the one-node run. Skips with the reason without root, `ip` or
// network namespaces; the namespaces go whatever happens. Traffic stays inside them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "config/load.h"
#include "pipeline_harness.h"
#include "relay/shm/segment.h"
#include "runner/builtins.h"
#include "runner/node_hub.h"
#include "support/command.h"
#include "tp_all_reduce.h"

extern char** environ;

namespace omnirt::runner {
namespace {

using std::chrono::milliseconds;

int run(const std::string& command) { return std::system((command + " > /dev/null 2>&1").c_str()); }

// Two namespaces joined by a veth pair; removed by the destructor.
class Namespaces {
  public:
    Namespaces() : tag_(std::to_string(::getpid())) {}
    ~Namespaces() {
        // In the mount namespace this process started in (enter() made one of its own, where
        // the namespaces' files cannot be removed).
        const std::string prefix = original_mounts_ >= 0
                                       ? "nsenter --mount=/proc/" + std::to_string(::getpid()) +
                                             "/fd/" + std::to_string(original_mounts_) + " -- "
                                       : "";
        for (const auto& name : names_) run(prefix + "ip netns del " + name);
        if (original_mounts_ >= 0) ::close(original_mounts_);
    }

    // Empty on success, else why the test cannot run here.
    std::string create() {
        if (::geteuid() != 0) return "network namespaces need root";
        if (run("command -v ip") != 0) return "no 'ip' command (iproute2)";
        for (int i = 0; i < 2; ++i) {
            std::string name = "omnirt-t" + tag_ + "-" + std::to_string(i);
            if (run("ip netns add " + name) != 0)
                return "ip netns add failed: no network namespaces";
            names_.push_back(name);
        }
        const std::string a = "omt" + tag_ + "a";
        const std::string b = "omt" + tag_ + "b";
        const std::string steps[] = {
            "ip link add " + a + " type veth peer name " + b,
            "ip link set " + a + " netns " + names_[0],
            "ip link set " + b + " netns " + names_[1],
            "ip -n " + names_[0] + " addr add 10.77.1.1/24 dev " + a,
            "ip -n " + names_[1] + " addr add 10.77.1.2/24 dev " + b,
            "ip -n " + names_[0] + " link set lo up",
            "ip -n " + names_[1] + " link set lo up",
            "ip -n " + names_[0] + " link set " + a + " up",
            "ip -n " + names_[1] + " link set " + b + " up",
        };
        for (const auto& step : steps) {
            if (run(step) != 0) return "'" + step + "' failed";
        }
        return {};
    }

    // Moves this (still single-threaded) process into namespace `index` the way `ip netns exec`
    // does: its network namespace, and a mount namespace of its own whose /sys shows that
    // namespace's interfaces (UCX reads /sys/class/net).
    bool enter(int index) {
        const std::string& name = names_[static_cast<std::size_t>(index)];
        int fd = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        const bool joined = ::setns(fd, CLONE_NEWNET) == 0;
        ::close(fd);
        original_mounts_ = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        if (!joined || original_mounts_ < 0 || ::unshare(CLONE_NEWNS) != 0) return false;
        if (::mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) return false;
        ::umount2("/sys", MNT_DETACH);
        return ::mount(name.c_str(), "/sys", "sysfs", 0, nullptr) == 0;
    }

    // The veth ends, "omt<pid>a,omt<pid>b": each namespace has one.
    [[nodiscard]] std::string veth_devices() const { return "omt" + tag_ + "a,omt" + tag_ + "b"; }

    [[nodiscard]] const std::string& name(int index) const {
        return names_[static_cast<std::size_t>(index)];
    }

  private:
    std::string tag_;
    std::vector<std::string> names_;
    int original_mounts_ = -1;
};

// A child process, SIGTERM then SIGKILL at destruction.
struct Child {
    pid_t pid = -1;
    ~Child() {
        if (pid <= 0) return;
        ::kill(pid, SIGTERM);
        for (int i = 0; i < 100; ++i) {
            if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
            std::this_thread::sleep_for(milliseconds(50));
        }
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
};

// produce (1 MiB float32 tensors) -> double; `placement` is added to double's fields (its
// node, its replicas).
std::string pipeline_yaml(const std::string& placement) {
    return R"(
model_path: none
relay_backend: shm
endpoints: {scheme: tcp, base_port: 17000}
stages:
  - {name: produce, process: a, factory: test.tensor_producer,
     factory_args: {bytes: 1048576, dtype: float32}, next: double}
  - {name: double, process: b, factory: test.arithmetic, factory_args: {scale: 2},
     terminal: true)" +
           placement + R"(}
)";
}

// The pids of the processes in network namespace `name`.
std::vector<pid_t> pids_in(const std::string& name) {
    std::vector<pid_t> pids;
    FILE* out = ::popen(("ip netns pids " + name).c_str(), "r");
    if (out == nullptr) return pids;
    int pid = 0;
    while (std::fscanf(out, "%d", &pid) == 1) pids.push_back(pid);
    ::pclose(out);
    return pids;
}

// The head's hub in namespace 0 (10.77.1.1) and `omnirt serve --node-rank 1` in namespace 1
// (10.77.1.2), its output in a log file; the pipeline started on both.
class HeadAndNode {
  public:
    explicit HeadAndNode(const Namespaces& namespaces) : namespaces_(namespaces) {}
    ~HeadAndNode() {
        if (!stopped_) {
            if (hub_) hub_->stop(milliseconds(0));
            if (pipeline_) pipeline_->stop();
        }
        ::unlink(log_.c_str());
    }

    // Node 1 joined: empty, else what failed.
    std::string join() {
        auto hub = NodeHub::create({.bind_endpoint = "tcp://10.77.1.1:0",
                                    .nnodes = 2,
                                    .head_address = "10.77.1.1",
                                    .heartbeat_interval = milliseconds(100),
                                    .node_timeout = milliseconds(3000)});
        if (!hub) return hub.error().to_string();
        hub_ = std::move(*hub);
        const std::string endpoint = hub_->endpoint();  // tcp://10.77.1.1:PORT
        const std::string head = endpoint.substr(std::string("tcp://").size());
        std::vector<std::string> args = {"ip",
                                         "netns",
                                         "exec",
                                         namespaces_.name(1),
                                         omnirt::testing::omnirt_binary(),
                                         "serve",
                                         "--nnodes",
                                         "2",
                                         "--node-rank",
                                         "1",
                                         "--dist-init-addr",
                                         head,
                                         "--node-addr",
                                         "10.77.1.2",
                                         "--port",
                                         "0",
                                         "--node-join-timeout",
                                         "60"};
        std::vector<char*> argv;
        for (auto& arg : args) argv.push_back(arg.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0600);
        posix_spawn_file_actions_adddup2(&actions, 1, 2);
        // The environment carries UCX_TLS and OMNIRT_TEST_STAGES for its stage processes.
        const int spawned = posix_spawnp(&node_.pid, "ip", &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        if (spawned != 0) return std::string("posix_spawnp ip: ") + std::strerror(spawned);
        auto addresses = hub_->wait_for_nodes(milliseconds(60000));
        if (!addresses) return addresses.error().to_string() + "\nnode 1: " + node_log();
        addresses_ = *addresses;
        return {};
    }

    Result<Pipeline*> start(const std::string& yaml) {
        auto config = config::load_pipeline_text(yaml, "<two namespaces>");
        if (!config) return fail(config.error());
        NodeHub* raw_hub = hub_.get();
        auto pipeline = Pipeline::start(
            *config, {.binary = omnirt::testing::omnirt_binary(),
                      .heartbeat_interval = milliseconds(20),
                      .node_addresses = addresses_,
                      .on_coordinator_started =
                          [raw_hub](auto plan, pipeline::Coordinator& c) {
                              return raw_hub->serve_plan(std::move(plan), c);
                          },
                      .before_stop = [raw_hub] { raw_hub->stop(milliseconds(10000)); }});
        if (!pipeline) return fail(pipeline.error().with_context("node 1: " + node_log()));
        pipeline_ = std::move(*pipeline);
        return pipeline_.get();
    }

    // The head stops; told by it, node 1 stops its stages and exits: its wait status.
    int stop() {
        stopped_ = true;
        hub_->stop(milliseconds(10000));
        pipeline_->stop();
        int status = -1;
        for (int i = 0; i < 200 && ::waitpid(node_.pid, &status, WNOHANG) == 0; ++i) {
            std::this_thread::sleep_for(milliseconds(50));
        }
        node_.pid = -1;
        return status;
    }

    [[nodiscard]] const std::vector<std::string>& addresses() const { return addresses_; }
    [[nodiscard]] std::string node_log() const {
        std::ostringstream text;
        text << std::ifstream(log_).rdbuf();
        return text.str();
    }

  private:
    const Namespaces& namespaces_;
    std::string log_ = ::testing::TempDir() + "/netns-node1-" + std::to_string(::getpid());
    std::unique_ptr<NodeHub> hub_;
    std::vector<std::string> addresses_;
    Child node_;
    std::unique_ptr<Pipeline> pipeline_;
    bool stopped_ = false;
};

// Namespaces made and entered, UCX on the veth only: empty, else why the test is skipped.
std::string enter_namespaces(Namespaces& namespaces) {
    if (std::string why = namespaces.create(); !why.empty()) return why;
    if (run("command -v nsenter") != 0) return "no 'nsenter' (util-linux)";
    if (!namespaces.enter(0)) return std::string("entering namespace 0: ") + std::strerror(errno);
    ::setenv("UCX_TLS", "tcp", /*overwrite=*/0);  // tcp unless the caller chose
    // Only the link between the nodes: UCX 1.13 gives up on a peer that also advertises an
    // interface it cannot reach (its lo), even when the veth would do (openucx/ucx#7599).
    ::setenv("UCX_NET_DEVICES", namespaces.veth_devices().c_str(), /*overwrite=*/0);
    return {};
}

// `count` requests through `pipeline`, their results.
std::vector<Value> submit_all(Pipeline& pipeline, const std::string& prefix, int first, int count) {
    std::vector<Value> out;
    for (int i = first; i < first + count; ++i) {
        auto result =
            pipeline.submit(prefix + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        EXPECT_TRUE(result.has_value()) << i << ": " << result.error().to_string();
        out.push_back(result.has_value() ? result->data : Value{});
    }
    return out;
}

// The results of `count` requests through `yaml` with every process on this host (the
// reference the two-node runs must equal).
std::vector<Value> one_node_results(const std::string& yaml, int count) {
    auto single = omnirt::testing::start_pipeline(yaml, {.placement = Placement::processes});
    EXPECT_TRUE(single.has_value()) << single.error().to_string();
    return single.has_value() ? submit_all(**single, "one-", 0, count) : std::vector<Value>{};
}

TEST(PipelineNetns, TensorsCrossNamespacesOverUcxTcp) {
    Namespaces namespaces;
    if (std::string why = enter_namespaces(namespaces); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(enable_test_stages().has_value());
    ASSERT_TRUE(register_builtins().has_value());

    const std::vector<Value> expected = one_node_results(pipeline_yaml(""), 3);

    HeadAndNode nodes(namespaces);
    ASSERT_EQ(nodes.join(), "");
    EXPECT_EQ(nodes.addresses(), (std::vector<std::string>{"10.77.1.1", "10.77.1.2"}));
    auto pipeline = nodes.start(pipeline_yaml(", node: 1"));
    ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
    EXPECT_EQ((*pipeline)->plan().edges.at(0).tier, "ucx");
    EXPECT_EQ(submit_all(**pipeline, "two-", 0, 3), expected);
    const int status = nodes.stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << nodes.node_log();
}

// Replicas spread over the namespaces (`node: [0, 1]`): round-robin sends every other request's
// tensor across the veth through ucx and the others through shm, results equal one node's; node
// 1 gone, only its replica is down (health degraded, naming the node) and replica 0 serves on.
TEST(PipelineNetns, ReplicasSpreadOverNamespacesKeepServingWhenOneGoes) {
    Namespaces namespaces;
    if (std::string why = enter_namespaces(namespaces); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(enable_test_stages().has_value());
    ASSERT_TRUE(register_builtins().has_value());

    const std::vector<Value> expected = one_node_results(pipeline_yaml(", replicas: 2"), 8);

    HeadAndNode nodes(namespaces);
    ASSERT_EQ(nodes.join(), "");
    auto pipeline = nodes.start(pipeline_yaml(", replicas: 2, node: [0, 1]"));
    ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
    std::map<std::string, std::string> tiers;
    for (const auto& edge : (*pipeline)->plan().edges) tiers[edge.from + ">" + edge.to] = edge.tier;
    EXPECT_EQ(tiers["produce>double"], "shm+ucx");
    auto children = (*pipeline)->process_ids();
    EXPECT_TRUE(children.contains("b.r0"));
    EXPECT_FALSE(children.contains("b.r1"));
    const std::vector<Value> first = submit_all(**pipeline, "two-", 0, 4);
    EXPECT_EQ(first, std::vector<Value>(expected.begin(), expected.begin() + 4));
    EXPECT_TRUE((*pipeline)->health().healthy) << (*pipeline)->health().reason;

    // Node 1 leaves (its process killed: no goodbye, the head finds it missing).
    const std::vector<pid_t> node_pids = pids_in(namespaces.name(1));
    ASSERT_FALSE(node_pids.empty());
    for (pid_t pid : node_pids) ::kill(pid, SIGKILL);
    // Its replica's process stops answering first; then the head finds the node missing
    // (node_timeout, 3 s) and marks the replica restarting.
    const auto replica_restarting = [](const auto& health) {
        for (const auto& stage : health.stages) {
            if (stage.stage == "double.r1") return stage.state == pipeline::StageState::restarting;
        }
        return false;
    };
    auto health = (*pipeline)->health();
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(30000);
    while (!replica_restarting(health) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(20));  // polling the reported state, a bound
        health = (*pipeline)->health();
    }
    EXPECT_FALSE(health.healthy);
    EXPECT_TRUE(health.degraded) << health.reason;
    for (const auto& stage : health.stages) {
        if (stage.stage == "double.r1") {
            EXPECT_EQ(stage.state, pipeline::StageState::restarting);
            EXPECT_NE(stage.down_reason.find("10.77.1.2"), std::string::npos) << stage.down_reason;
        } else {
            EXPECT_NE(stage.state, pipeline::StageState::restarting) << stage.stage;
        }
    }
    const std::vector<Value> after = submit_all(**pipeline, "two-", 4, 4);
    EXPECT_EQ(after, std::vector<Value>(expected.begin() + 4, expected.end()));
    const std::string runtime_dir = (*pipeline)->plan().runtime_dir;
    nodes.stop();
    EXPECT_EQ(omnirt::testing::count_instance_segments(runtime_dir), 0);
    // What node 1's processes had mapped stays in its host's /dev/shm (under node 1's own
    // instance) until an omnirt starts there again: the shm relay removes dead processes'
    // segments when it opens. Here that host is this one: the same sweep for those processes,
    // then none of theirs is left.
    for (pid_t pid : node_pids) {
        // Gone once reaped (their parent, node 1's omnirt, is dead: init reaps them).
        const auto reaped_by = std::chrono::steady_clock::now() + milliseconds(10000);
        while (relay::shm::process_alive(pid) && std::chrono::steady_clock::now() < reaped_by) {
            std::this_thread::sleep_for(milliseconds(10));  // polling the process table, a bound
        }
        relay::shm::remove_segments_of_dead_process(pid);
    }
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
        const auto name = relay::shm::parse_segment_name(entry.path().filename().string());
        if (!name) continue;
        EXPECT_EQ(std::count(node_pids.begin(), node_pids.end(), name->pid), 0)
            << entry.path() << " of a process of node 1";
    }
}

#ifdef OMNIRT_TP_PLUGIN_PATH
// A tensor-parallel stage with rank 0 in namespace 0 and rank 1 in namespace 1: every request
// all-reduces over the stage's gloo group across the veth (each rank binds gloo to its node's
// address; the host name resolves to 127.0.0.1 here, which the other namespace cannot reach).
// Results equal the one-node run.
TEST(PipelineNetns, TensorParallelRanksInTwoNamespacesAllReduceOverTheLink) {
    Namespaces namespaces;
    if (std::string why = enter_namespaces(namespaces); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(enable_test_stages().has_value());
    ASSERT_TRUE(register_builtins().has_value());
    const auto yaml = [](const std::string& placement) {
        return std::string(R"(
model_path: none
relay_backend: shm
plugins: [")" OMNIRT_TP_PLUGIN_PATH R"("]
endpoints: {scheme: tcp, base_port: 17100}
stages:
  - {name: tp, factory: test.tp_all_reduce, tp_size: 2, next: last)") +
               placement + R"(}
  - {name: last, process: last, factory: test.identity, terminal: true}
)";
    };
    const std::vector<Value> expected = one_node_results(yaml(""), 3);
    ASSERT_EQ(expected.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(expected[i], omnirt::testing::two_rank_sum(i)) << i;

    HeadAndNode nodes(namespaces);
    ASSERT_EQ(nodes.join(), "");
    auto pipeline = nodes.start(yaml(", node: [0, 1]"));
    ASSERT_TRUE(pipeline.has_value()) << pipeline.error().to_string();
    EXPECT_EQ((*pipeline)->plan().find_process("tp_tp1")->node, 1);
    EXPECT_EQ(submit_all(**pipeline, "two-", 0, 3), expected) << nodes.node_log();
    const int status = nodes.stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << nodes.node_log();
}
#endif

}  // namespace
}  // namespace omnirt::runner

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

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "config/load.h"
#include "pipeline_harness.h"
#include "runner/builtins.h"
#include "runner/node_hub.h"
#include "support/command.h"

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

std::string pipeline_yaml(bool two_nodes) {
    const std::string node1 = two_nodes ? ", node: 1" : "";
    return R"(
model_path: none
relay_backend: shm
endpoints: {scheme: tcp, base_port: 17000}
stages:
  - {name: produce, process: a, factory: test.tensor_producer,
     factory_args: {bytes: 1048576, dtype: float32}, next: double}
  - {name: double, process: b, factory: test.arithmetic, factory_args: {scale: 2},
     terminal: true)" +
           node1 + R"(}
)";
}

TEST(PipelineNetns, TensorsCrossNamespacesOverUcxTcp) {
    Namespaces namespaces;
    if (std::string why = namespaces.create(); !why.empty()) GTEST_SKIP() << why;
    if (run("command -v nsenter") != 0) GTEST_SKIP() << "no 'nsenter' (util-linux)";
    ASSERT_TRUE(namespaces.enter(0)) << std::strerror(errno);
    ::setenv("UCX_TLS", "tcp", /*overwrite=*/0);  // tcp unless the caller chose
    // Only the link between the nodes: UCX 1.13 gives up on a peer that also advertises an
    // interface it cannot reach (its lo), even when the veth would do (openucx/ucx#7599).
    ::setenv("UCX_NET_DEVICES", namespaces.veth_devices().c_str(), /*overwrite=*/0);
    ASSERT_TRUE(enable_test_stages().has_value());
    ASSERT_TRUE(register_builtins().has_value());

    std::vector<Value> expected;
    {
        auto single = omnirt::testing::start_pipeline(pipeline_yaml(false),
                                                      {.placement = Placement::processes});
        ASSERT_TRUE(single.has_value()) << single.error().to_string();
        for (int i = 0; i < 3; ++i) {
            auto result =
                (*single)->submit("one-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
            ASSERT_TRUE(result.has_value()) << result.error().to_string();
            expected.push_back(result->data);
        }
    }

    auto hub = NodeHub::create({.bind_endpoint = "tcp://10.77.1.1:0",
                                .nnodes = 2,
                                .head_address = "10.77.1.1",
                                .heartbeat_interval = milliseconds(100),
                                .node_timeout = milliseconds(3000)});
    ASSERT_TRUE(hub.has_value()) << hub.error().to_string();
    const std::string endpoint = (*hub)->endpoint();  // tcp://10.77.1.1:PORT
    const std::string head = endpoint.substr(std::string("tcp://").size());
    const std::string log = ::testing::TempDir() + "/netns-node1-" + std::to_string(::getpid());
    std::vector<std::string> args = {"ip",
                                     "netns",
                                     "exec",
                                     namespaces.name(1),
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
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    Child node;
    // The environment carries UCX_TLS and OMNIRT_TEST_STAGES for its stage processes.
    ASSERT_EQ(posix_spawnp(&node.pid, "ip", &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);

    auto addresses = (*hub)->wait_for_nodes(milliseconds(60000));
    ASSERT_TRUE(addresses.has_value()) << addresses.error().to_string();
    EXPECT_EQ(*addresses, (std::vector<std::string>{"10.77.1.1", "10.77.1.2"}));
    auto config = config::load_pipeline_text(pipeline_yaml(true), "<two namespaces>");
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
    ASSERT_TRUE(pipeline.has_value())
        << pipeline.error().to_string() << "\nnode 1: " << std::ifstream(log).rdbuf();
    EXPECT_EQ((*pipeline)->plan().edges.at(0).tier, "ucx");
    for (int i = 0; i < 3; ++i) {
        auto result =
            (*pipeline)->submit("two-" + std::to_string(i), OmniRequest{.inputs = Map{{"n", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, expected[static_cast<std::size_t>(i)]) << i;
    }
    (*hub)->stop(milliseconds(10000));
    (*pipeline)->stop();
    // Told by the head, node 1 stops its stages and exits 0.
    int status = -1;
    for (int i = 0; i < 200 && ::waitpid(node.pid, &status, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(milliseconds(50));
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << std::ifstream(log).rdbuf();
    node.pid = -1;
    ::unlink(log.c_str());
}

}  // namespace
}  // namespace omnirt::runner

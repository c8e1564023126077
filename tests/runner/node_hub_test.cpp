// NodeHub (runner/node_hub.h) against raw ZMQ peers: the join handshake, refused and malformed
// joins, the bounded wait for nodes, the plan handed out, and a node that goes silent and comes
// back (reported to a real coordinator).
#include "runner/node_hub.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "config/runtime_dir.h"
#include "runner/node_protocol.h"
#include "runner/plan_codec.h"

namespace omnirt::runner {
namespace {

using std::chrono::milliseconds;

// A node as the hub sees it: a DEALER connected to the hub's endpoint.
class FakeNode {
  public:
    FakeNode(zmq::context_t& context, const std::string& endpoint)
        : socket_(context, zmq::socket_type::dealer) {
        socket_.set(zmq::sockopt::linger, 0);
        socket_.connect(endpoint);
    }

    void send_bytes(const std::vector<std::uint8_t>& bytes) {
        ASSERT_TRUE(socket_.send(zmq::buffer(bytes), zmq::send_flags::none));
    }
    void send(const node::NodeMessage& message) {
        auto bytes = node::encode_node_message(message);
        ASSERT_TRUE(bytes.has_value());
        send_bytes(*bytes);
    }

    // The next message of `type` within the timeout (others are skipped: hub heartbeats).
    std::optional<node::NodeMessage> receive(std::string_view type,
                                             milliseconds timeout = milliseconds(5000)) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
            zmq::poll(&item, 1, milliseconds(50));
            zmq::message_t frame;
            if (!socket_.recv(frame, zmq::recv_flags::dontwait)) continue;
            auto message = node::decode_node_message(
                std::span(static_cast<const std::uint8_t*>(frame.data()), frame.size()));
            if (message && node::message_type(*message) == type) return *message;
        }
        return std::nullopt;
    }

    std::string reject_reason() {
        auto message = receive("reject");
        return message ? std::get<node::Reject>(*message).reason : "<no reject>";
    }

  private:
    zmq::socket_t socket_;
};

node::Join join_as(int rank, std::string address = "10.77.0.2", int nnodes = 2) {
    return node::Join{
        .nnodes = nnodes, .node_rank = rank, .address = std::move(address), .pid = 77};
}

class NodeHubTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto hub = NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0",
                                    .nnodes = 2,
                                    .head_address = "127.0.0.1",
                                    .heartbeat_interval = milliseconds(50),
                                    .node_timeout = milliseconds(2000)});
        ASSERT_TRUE(hub.has_value()) << hub.error().to_string();
        hub_ = std::move(*hub);
    }

    zmq::context_t context_{1};
    std::unique_ptr<NodeHub> hub_;
};

TEST_F(NodeHubTest, CreateRefusesBadOptions) {
    EXPECT_FALSE(
        NodeHub::create(
            {.bind_endpoint = "tcp://127.0.0.1:0", .nnodes = 1, .head_address = "127.0.0.1"})
            .has_value());
    EXPECT_FALSE(
        NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0", .nnodes = 2, .head_address = ""})
            .has_value());
    auto unbindable = NodeHub::create(
        {.bind_endpoint = "tcp://not an address:1", .nnodes = 2, .head_address = "127.0.0.1"});
    ASSERT_FALSE(unbindable.has_value());
    EXPECT_EQ(unbindable.error().code, ErrorCode::unavailable);
}

TEST_F(NodeHubTest, WaitForNodesNamesTheMissingRank) {
    auto addresses = hub_->wait_for_nodes(milliseconds(200));
    ASSERT_FALSE(addresses.has_value());
    EXPECT_EQ(addresses.error().code, ErrorCode::deadline_exceeded);
    EXPECT_NE(addresses.error().message.find("node 1 did not join within 0.2 s"), std::string::npos)
        << addresses.error().message;
}

TEST_F(NodeHubTest, MalformedAndRefusedJoinsGetAReasonAndChangeNothing) {
    FakeNode node(context_, hub_->endpoint());
    node.send_bytes({0xc1, 0x00});
    EXPECT_NE(node.reject_reason().find("node message: not a valid encoding"), std::string::npos);
    node.send_bytes(
        *proto::encode_value(Value(Map{{"type", "join"}, {"version", node::kProtocolVersion}})));
    EXPECT_NE(node.reject_reason().find("nnodes: missing"), std::string::npos);
    node.send(join_as(1, "10.77.0.2", 3));
    EXPECT_NE(node.reject_reason().find("the node says --nnodes 3, the head runs 2 nodes"),
              std::string::npos);
    node.send(join_as(0));
    EXPECT_NE(node.reject_reason().find("node rank 0 is the head"), std::string::npos);
    node.send(join_as(5));
    EXPECT_NE(node.reject_reason().find("node rank 5 is not below --nnodes 2"), std::string::npos);
    node.send(node::Welcome{});
    EXPECT_NE(node.reject_reason().find("is sent by the head"), std::string::npos);
    node.send(node::Heartbeat{.session = 1, .node_rank = 1});
    EXPECT_TRUE(node.receive("rejoin").has_value());  // not joined: join first
    // None of that counted as a join.
    EXPECT_FALSE(hub_->wait_for_nodes(milliseconds(100)).has_value());
    EXPECT_FALSE(hub_->nodes()[1].joined);
}

TEST_F(NodeHubTest, LateJoinAndPlanAndNodeLossAndReturn) {
    // The head waits; the node joins after the wait began.
    auto waiting =
        std::async(std::launch::async, [&] { return hub_->wait_for_nodes(milliseconds(10000)); });
    FakeNode node(context_, hub_->endpoint());
    node.send(join_as(1));
    auto addresses = waiting.get();
    ASSERT_TRUE(addresses.has_value()) << addresses.error().to_string();
    EXPECT_EQ(*addresses, (std::vector<std::string>{"127.0.0.1", "10.77.0.2"}));

    // A plan with stage b on node 1 and a coordinator to report to.
    auto runtime_dir = config::RuntimeDirectory::create(std::filesystem::temp_directory_path());
    ASSERT_TRUE(runtime_dir.has_value());
    config::PipelineConfig config;
    config.model_path = "/m";
    config::StageConfig a{.name = "a", .factory = "f", .next = {"b"}, .process = "pa"};
    config::StageConfig b{.name = "b", .factory = "f", .terminal = true, .process = "pb"};
    b.node = 1;
    config.stages = {a, b};
    auto plan = config::prepare_runtime(
        config, {.runtime_dir = (*runtime_dir)->path(), .node_addresses = *addresses});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    auto shared = std::make_shared<const config::RuntimePlan>(*plan);
    pipeline::CoordinatorOptions options{
        .coordinator_endpoint = "ipc://" + (*runtime_dir)->path() + "/c.sock",
        .abort_endpoint = "ipc://" + (*runtime_dir)->path() + "/a.sock",
        .stage_endpoints = {{"a", "ipc://" + (*runtime_dir)->path() + "/sa.sock"},
                            {"b", "ipc://" + (*runtime_dir)->path() + "/sb.sock"}},
        .entry_stage = "a",
        .terminal_stages = {"b"}};
    auto coordinator = pipeline::Coordinator::create(options);
    ASSERT_TRUE(coordinator.has_value());
    ASSERT_TRUE((*coordinator)->start().has_value());
    ASSERT_TRUE(hub_->serve_plan(shared, **coordinator).has_value());
    EXPECT_FALSE(hub_->serve_plan(shared, **coordinator).has_value());  // once

    auto welcome = node.receive("welcome");
    ASSERT_TRUE(welcome.has_value());
    const auto& accepted = std::get<node::Welcome>(*welcome);
    auto received = decode_plan(accepted.plan);
    ASSERT_TRUE(received.has_value()) << received.error().to_string();
    EXPECT_EQ(received->find_stage("b")->endpoint, "tcp://10.77.0.2:17000");

    // Another process may not take over rank 1 with another address once the plan is placed.
    FakeNode impostor(context_, hub_->endpoint());
    impostor.send(join_as(1, "10.77.0.9"));
    EXPECT_NE(impostor.reject_reason().find("placed its stages on 10.77.0.2"), std::string::npos);

    // Silent past node_timeout: missing, its stage restarting with a reason naming the node.
    node.send(node::Heartbeat{.session = accepted.session, .node_rank = 1, .pids = {{"pb", 4242}}});
    auto missing = [&] { return hub_->nodes()[1].missing; };
    // The hub marks the node, then tells the coordinator: wait for the coordinator.
    auto down_reported = [&] {
        return (*coordinator)->health().reason.find("is missing") != std::string::npos;
    };
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
    while (!down_reported() && std::chrono::steady_clock::now() < deadline) {
        node.receive("none", milliseconds(50));
    }
    ASSERT_TRUE(missing());
    EXPECT_NE(hub_->nodes()[1].reason.find("node 1 (10.77.0.2) is missing: no word from it"),
              std::string::npos)
        << hub_->nodes()[1].reason;
    auto health = (*coordinator)->health();
    EXPECT_FALSE(health.healthy);
    EXPECT_NE(health.reason.find("stage 'b' is restarting: node 1 (10.77.0.2) is missing"),
              std::string::npos)
        << health.reason;
    // A request through b fails at once, naming the node.
    auto refused = (*coordinator)->submit("r1", OmniRequest{});
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find("node 1 (10.77.0.2)"), std::string::npos);

    // Heard again: no longer missing; the coordinator waits for b's heartbeat from pid 4242.
    node.send(node::Heartbeat{.session = accepted.session, .node_rank = 1, .pids = {{"pb", 4242}}});
    const auto back = std::chrono::steady_clock::now() + milliseconds(10000);
    while (missing() && std::chrono::steady_clock::now() < back) {
        node.receive("none", milliseconds(50));
    }
    EXPECT_FALSE(missing());
    // A heartbeat of a stale session is told to join again.
    node.send(node::Heartbeat{.session = accepted.session + 1, .node_rank = 1});
    EXPECT_TRUE(node.receive("rejoin").has_value());

    // Stop: the node is told to shut down; its leave ends the wait early.
    auto stopping = std::async(std::launch::async, [&] { hub_->stop(milliseconds(10000)); });
    ASSERT_TRUE(node.receive("shutdown").has_value());
    node.send(node::Leave{.session = accepted.session, .node_rank = 1, .reason = "stopped"});
    EXPECT_EQ(stopping.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    (*coordinator)->stop();
}

// Replicas spread over nodes (`node: [0, 1]`): a node speaks for its own replicas only, and its
// loss marks only them down; the replica on the head keeps the stage serving (degraded).
TEST_F(NodeHubTest, ANodeSpeaksForAndTakesDownOnlyItsOwnReplicas) {
    FakeNode node(context_, hub_->endpoint());
    node.send(join_as(1));
    auto addresses = hub_->wait_for_nodes(milliseconds(10000));
    ASSERT_TRUE(addresses.has_value()) << addresses.error().to_string();

    auto runtime_dir = config::RuntimeDirectory::create(std::filesystem::temp_directory_path());
    ASSERT_TRUE(runtime_dir.has_value());
    config::PipelineConfig config;
    config.model_path = "/m";
    config::StageConfig a{.name = "a", .factory = "f", .next = {"b"}, .process = "pa"};
    config::StageConfig b{.name = "b", .factory = "f", .terminal = true, .process = "pb"};
    b.replicas = 2;
    b.node = 0;
    b.node_list = {0, 1};
    config.stages = {a, b};
    auto plan = config::prepare_runtime(
        config, {.runtime_dir = (*runtime_dir)->path(), .node_addresses = *addresses});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    const std::string dir = (*runtime_dir)->path();
    pipeline::CoordinatorOptions options{
        .coordinator_endpoint = "ipc://" + dir + "/c.sock",
        .abort_endpoint = "ipc://" + dir + "/a.sock",
        .stage_endpoints = {{"a", "ipc://" + dir + "/sa.sock"},
                            {"b", "ipc://" + dir + "/sb0.sock"}},
        .entry_stage = "a",
        .terminal_stages = {"b"},
        .replica_endpoints = {{"b", {"ipc://" + dir + "/sb0.sock", "ipc://" + dir + "/sb1.sock"}}},
        .replica_groups = {{"b", "pb"}}};
    auto coordinator = pipeline::Coordinator::create(options);
    ASSERT_TRUE(coordinator.has_value()) << coordinator.error().to_string();
    ASSERT_TRUE((*coordinator)->start().has_value());
    ASSERT_TRUE(hub_->serve_plan(std::make_shared<const config::RuntimePlan>(*plan), **coordinator)
                    .has_value());
    auto welcome = node.receive("welcome");
    ASSERT_TRUE(welcome.has_value());
    const std::uint64_t session = std::get<node::Welcome>(*welcome).session;

    auto state_of = [&](const std::string& stage) {
        for (const auto& health : (*coordinator)->health().stages) {
            if (health.stage == stage) return health.state;
        }
        return pipeline::StageState::failed;
    };
    auto wait_until = [&](auto condition) {
        const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
        while (!condition() && std::chrono::steady_clock::now() < deadline) {
            node.receive("none", milliseconds(20));
        }
        return condition();
    };
    // Node 1 reports both replicas down: only b.r1 is its own; b.r0 (on the head) is untouched.
    node.send(node::StagesDown{.session = session,
                               .node_rank = 1,
                               .stages = {"b.r0", "b.r1"},
                               .reason = "process 'pb.r1' exited",
                               .restarting = true});
    ASSERT_TRUE(wait_until([&] { return state_of("b.r1") == pipeline::StageState::restarting; }));
    EXPECT_NE(state_of("b.r0"), pipeline::StageState::restarting);

    // Node 1 goes silent past node_timeout: again only b.r1, now naming the node.
    node.send(node::Heartbeat{.session = session, .node_rank = 1, .pids = {{"pb.r1", 4242}}});
    ASSERT_TRUE(wait_until([&] { return hub_->nodes()[1].missing; }));
    ASSERT_TRUE(wait_until([&] {
        return (*coordinator)->health().reason.find("node 1 (10.77.0.2) is missing") !=
               std::string::npos;
    }));
    EXPECT_EQ(state_of("b.r1"), pipeline::StageState::restarting);
    EXPECT_NE(state_of("b.r0"), pipeline::StageState::restarting);
    hub_->stop(milliseconds(0));
    (*coordinator)->stop();
}

// The process_control a node gets next with `start` (others skipped), if any.
std::optional<node::ProcessControl> control_to(FakeNode& node, bool start) {
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
    while (std::chrono::steady_clock::now() < deadline) {
        auto message = node.receive("process_control", milliseconds(200));
        if (!message) continue;
        auto control = std::get<node::ProcessControl>(*message);
        if (control.start == start) return control;
    }
    return std::nullopt;
}

// What the hub asked of the head's own processes.
class LocalControls {
  public:
    LocalProcessControl callback() {
        return [this](const std::vector<std::string>& processes, bool start,
                      const std::string& reason) {
            std::lock_guard lock(mutex_);
            calls_.push_back({processes, start, reason});
            changed_.notify_all();
        };
    }
    struct Call {
        std::vector<std::string> processes;
        bool start = false;
        std::string reason;
    };
    std::size_t count() {
        std::lock_guard lock(mutex_);
        return calls_.size();
    }
    // The calls once there are `count` of them (a hang guard bounds the wait).
    std::vector<Call> wait_for(std::size_t count) {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, milliseconds(10000), [&] { return calls_.size() >= count; });
        return calls_;
    }

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Call> calls_;
};

// A TP stage with a rank on each of three nodes: losing any node holds the ranks on the others
// down (the head's through the local control, the others' by process_control); when the node
// is back they start afresh (not on a node that joined again: its plan starts its own ranks).
TEST(NodeHubTpGroups, ANodeLossHoldsTheStagesRanksElsewhereUntilItIsBack) {
    zmq::context_t context(1);
    auto hub = NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0",
                                .nnodes = 3,
                                .head_address = "127.0.0.1",
                                .heartbeat_interval = milliseconds(50),
                                .node_timeout = milliseconds(2000),
                                .node_names = {"head", "gpu-a", "gpu-b"}});
    ASSERT_TRUE(hub.has_value()) << hub.error().to_string();
    auto node1 = std::make_unique<FakeNode>(context, (*hub)->endpoint());
    FakeNode node2(context, (*hub)->endpoint());
    node1->send(join_as(1, "10.77.0.2", 3));
    node2.send(join_as(2, "10.77.0.3", 3));
    auto addresses = (*hub)->wait_for_nodes(milliseconds(10000));
    ASSERT_TRUE(addresses.has_value()) << addresses.error().to_string();

    auto runtime_dir = config::RuntimeDirectory::create(std::filesystem::temp_directory_path());
    ASSERT_TRUE(runtime_dir.has_value());
    config::PipelineConfig config;
    config.model_path = "/m";
    config.node_names = {"head", "gpu-a", "gpu-b"};
    config::StageConfig a{.name = "a", .factory = "f", .next = {"t"}, .process = "pa"};
    config::StageConfig t{.name = "t", .factory = "f", .terminal = true, .tp_size = 3};
    t.node = 0;
    t.node_list = {0, 1, 2};
    config.stages = {a, t};
    auto plan = config::prepare_runtime(
        config, {.runtime_dir = (*runtime_dir)->path(), .node_addresses = *addresses});
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    ASSERT_EQ(plan->find_process("t_tp2")->node, 2);
    const std::string dir = (*runtime_dir)->path();
    auto coordinator =
        pipeline::Coordinator::create({.coordinator_endpoint = "ipc://" + dir + "/c.sock",
                                       .abort_endpoint = "ipc://" + dir + "/a.sock",
                                       .stage_endpoints = {{"a", "ipc://" + dir + "/sa.sock"},
                                                           {"t", "ipc://" + dir + "/st.sock"}},
                                       .entry_stage = "a",
                                       .terminal_stages = {"t"}});
    ASSERT_TRUE(coordinator.has_value()) << coordinator.error().to_string();
    ASSERT_TRUE((*coordinator)->start().has_value());
    LocalControls local;
    (*hub)->set_local_control(local.callback());
    ASSERT_TRUE((*hub)
                    ->serve_plan(std::make_shared<const config::RuntimePlan>(*plan), **coordinator)
                    .has_value());
    auto welcome = node1->receive("welcome");
    ASSERT_TRUE(welcome.has_value());
    ASSERT_TRUE(node2.receive("welcome").has_value());
    const std::uint64_t session = std::get<node::Welcome>(*welcome).session;
    auto state_of = [&](const std::string& stage) {
        for (const auto& health : (*coordinator)->health().stages) {
            if (health.stage == stage) return health.state;
        }
        return pipeline::StageState::failed;
    };

    // Node 1 leaves: t is down naming it; rank 0 (head) and rank 2 (node 2) are held down.
    node1->send(node::Leave{.session = session, .node_rank = 1, .reason = "bye"});
    auto calls = local.wait_for(1);
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].processes, (std::vector<std::string>{"t_tp0"}));
    EXPECT_FALSE(calls[0].start);
    EXPECT_NE(calls[0].reason.find("node gpu-a (rank 1, 10.77.0.2)"), std::string::npos)
        << calls[0].reason;
    auto held = control_to(node2, false);
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ(held->processes, (std::vector<std::string>{"t_tp2"}));
    EXPECT_EQ(held->session, session);
    EXPECT_EQ(state_of("t"), pipeline::StageState::restarting);
    EXPECT_NE((*coordinator)
                  ->health()
                  .reason.find("node gpu-a (rank 1, 10.77.0.2) is missing: "
                               "it left (bye)"),
              std::string::npos)
        << (*coordinator)->health().reason;
    EXPECT_NE(state_of("a"), pipeline::StageState::restarting);

    // Node 1 joins again (a new process): its plan starts rank 1; the hub starts ranks 0 and 2.
    node1 = std::make_unique<FakeNode>(context, (*hub)->endpoint());
    node1->send(join_as(1, "10.77.0.2", 3));
    ASSERT_TRUE(node1->receive("welcome").has_value());
    calls = local.wait_for(2);
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[1].processes, (std::vector<std::string>{"t_tp0"}));
    EXPECT_TRUE(calls[1].start);
    auto released = control_to(node2, true);
    ASSERT_TRUE(released.has_value());
    EXPECT_EQ(released->processes, (std::vector<std::string>{"t_tp2"}));
    EXPECT_FALSE(node1->receive("process_control", milliseconds(300)).has_value());

    // Node 2 falls silent (its link; its processes live on): held again; when it is heard
    // again its own rank starts afresh too. Node 1 keeps heartbeating meanwhile.
    std::vector<node::ProcessControl> node1_controls;
    auto pump_node1_until = [&](const std::function<bool()>& condition) {
        const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
        while (!condition() && std::chrono::steady_clock::now() < deadline) {
            node1->send(
                node::Heartbeat{.session = session, .node_rank = 1, .pids = {{"t_tp1", 43}}});
            auto message = node1->receive("process_control", milliseconds(100));
            if (message) node1_controls.push_back(std::get<node::ProcessControl>(*message));
        }
        return condition();
    };
    ASSERT_TRUE(pump_node1_until([&] { return !(*hub)->nodes()[1].missing; }));
    node2.send(node::Heartbeat{.session = session, .node_rank = 2, .pids = {{"t_tp2", 4242}}});
    ASSERT_TRUE(pump_node1_until([&] { return local.count() >= 3 && !node1_controls.empty(); }));
    calls = local.wait_for(3);
    EXPECT_FALSE(calls[2].start);
    EXPECT_NE(calls[2].reason.find("node gpu-b (rank 2, 10.77.0.3)"), std::string::npos)
        << calls[2].reason;
    EXPECT_FALSE(node1_controls[0].start);
    EXPECT_EQ(node1_controls[0].processes, (std::vector<std::string>{"t_tp1"}));
    node2.send(node::Heartbeat{.session = session, .node_rank = 2, .pids = {{"t_tp2", 4242}}});
    ASSERT_TRUE(pump_node1_until([&] { return local.count() >= 4 && node1_controls.size() >= 2; }));
    calls = local.wait_for(4);
    EXPECT_TRUE(calls[3].start);
    EXPECT_TRUE(node1_controls[1].start);
    EXPECT_EQ(node1_controls[1].processes, (std::vector<std::string>{"t_tp1"}));
    auto again = control_to(node2, true);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->processes, (std::vector<std::string>{"t_tp2"}));
    // Follower heartbeats revive nothing: t waits for rank 0's new incarnation.
    EXPECT_EQ(state_of("t"), pipeline::StageState::restarting);

    // A process_control sent to the hub is refused.
    node2.send(node::ProcessControl{.session = session, .processes = {"x"}, .start = true});
    EXPECT_NE(node2.reject_reason().find("is sent by the head"), std::string::npos);
    (*hub)->stop(milliseconds(0));
    (*coordinator)->stop();
}

TEST(NodeHubTpGroups, MoreNodeNamesThanNodesAreRefused) {
    auto hub = NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0",
                                .nnodes = 2,
                                .head_address = "127.0.0.1",
                                .node_names = {"a", "b", "c"}});
    ASSERT_FALSE(hub.has_value());
    EXPECT_EQ(hub.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(hub.error().message.find("nodes: names 3 nodes, but --nnodes is 2"),
              std::string::npos)
        << hub.error().message;
    // Names say which node did not join.
    auto named = NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0",
                                  .nnodes = 2,
                                  .head_address = "127.0.0.1",
                                  .node_names = {"head", "gpu-a"}});
    ASSERT_TRUE(named.has_value());
    auto waited = (*named)->wait_for_nodes(milliseconds(100));
    ASSERT_FALSE(waited.has_value());
    EXPECT_NE(waited.error().message.find("node 1 (gpu-a) did not join"), std::string::npos)
        << waited.error().message;
}

}  // namespace
}  // namespace omnirt::runner

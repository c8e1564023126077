#include "runner/node_agent.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <mutex>
#include <optional>
#include <vector>
#include <zmq.hpp>

#include "runner/node_protocol.h"
#include "runner/plan_codec.h"

namespace omnirt::runner {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPollInterval{50};

// Supervision threads queue their reports; the agent's thread sends them.
class Outbox {
  public:
    void push(node::NodeMessage message) {
        std::lock_guard lock(mutex_);
        messages_.push_back(std::move(message));
    }
    std::vector<node::NodeMessage> take() {
        std::lock_guard lock(mutex_);
        return std::exchange(messages_, {});
    }

  private:
    std::mutex mutex_;
    std::vector<node::NodeMessage> messages_;
};

class Link {
  public:
    Link(zmq::context_t& context, const std::string& endpoint)
        : socket_(context, zmq::socket_type::dealer) {
        socket_.set(zmq::sockopt::linger, 1000);  // a leave still goes out at close
        socket_.connect(endpoint);
    }

    void send(const node::NodeMessage& message) {
        auto bytes = node::encode_node_message(message);
        if (!bytes) {
            spdlog::error("node agent: encoding '{}': {}", node::message_type(message),
                          bytes.error().message);
            return;
        }
        try {
            socket_.send(zmq::buffer(*bytes), zmq::send_flags::dontwait);
        } catch (const zmq::error_t& error) {
            spdlog::debug("node agent: sending '{}': {}", node::message_type(message),
                          error.what());
        }
    }

    // The next message within `timeout`, if any; malformed ones are logged and skipped.
    std::optional<node::NodeMessage> receive(std::chrono::milliseconds timeout) {
        zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, timeout);
        zmq::message_t frame;
        if (!socket_.recv(frame, zmq::recv_flags::dontwait)) return std::nullopt;
        auto message = node::decode_node_message(
            std::span(static_cast<const std::uint8_t*>(frame.data()), frame.size()));
        if (!message) {
            spdlog::warn("node agent: from the head: {}", message.error().message);
            return std::nullopt;
        }
        return std::move(*message);
    }

  private:
    zmq::socket_t socket_;
};

enum class SessionEnd : std::uint8_t { stopped, rejoin, head_shutdown };

// Runs the node's stages under one welcome until stop, a rejoin or the head's shutdown.
Result<SessionEnd> run_session(const NodeAgentOptions& options, Link& link,
                               const node::Welcome& welcome, const std::atomic<bool>& stop) {
    OMNI_TRY(config::RuntimePlan plan, decode_plan(welcome.plan));
    // The node's name when the config's `nodes:` gives one (for its /health).
    const std::string name = static_cast<std::size_t>(options.node_rank) < plan.node_names.size()
                                 ? plan.node_names[static_cast<std::size_t>(options.node_rank)]
                                 : std::string();
    auto outbox = std::make_shared<Outbox>();
    const std::uint64_t session = welcome.session;
    const int rank = options.node_rank;
    StageEvents events{
        .down =
            [outbox, session, rank](const std::vector<std::string>& stages,
                                    const std::string& reason, pipeline::StageState state) {
                outbox->push(
                    node::StagesDown{.session = session,
                                     .node_rank = rank,
                                     .stages = stages,
                                     .reason = reason,
                                     .restarting = state == pipeline::StageState::restarting});
            },
        .restarted =
            [outbox, session, rank](const std::vector<std::string>& stages, std::int64_t pid) {
                outbox->push(node::StagesRestarted{
                    .session = session, .node_rank = rank, .stages = stages, .pid = pid});
            }};
    auto pipeline = Pipeline::start_node(std::move(plan), rank, welcome.restart, std::move(events),
                                         options.pipeline);
    if (!pipeline) {
        link.send(node::Leave{.session = session,
                              .node_rank = rank,
                              .reason = "its stages did not start: " + pipeline.error().message});
        return fail(pipeline.error().with_context("node " + std::to_string(rank)));
    }
    spdlog::info("node {}: {} process groups running", rank, (*pipeline)->process_ids().size());
    auto report = [&](bool running, std::string detail) {
        if (!options.status) return;
        NodeAgentStatus::Snapshot snapshot{
            .running = running, .detail = std::move(detail), .node_name = name};
        for (const auto& [process, pid] : (*pipeline)->process_ids()) {
            snapshot.processes.emplace(process, pid);
        }
        options.status->set(std::move(snapshot));
    };
    auto next_heartbeat = Clock::now();
    SessionEnd end = SessionEnd::stopped;
    while (!stop) {
        if (Clock::now() >= next_heartbeat) {
            next_heartbeat = Clock::now() + options.heartbeat_interval;
            node::Heartbeat heartbeat{.session = session, .node_rank = rank};
            for (const auto& [process, pid] : (*pipeline)->process_ids()) {
                heartbeat.pids.emplace(process, pid);
            }
            link.send(heartbeat);
            report(true, "serving for the head at " + options.head_endpoint);
        }
        for (auto& message : outbox->take()) link.send(message);
        auto message = link.receive(kPollInterval);
        if (!message) continue;
        if (const auto* rejoin = std::get_if<node::Rejoin>(&*message)) {
            spdlog::warn("node {}: the head asks to join again: {}", rank, rejoin->reason);
            end = SessionEnd::rejoin;
            break;
        }
        if (const auto* shutdown = std::get_if<node::Shutdown>(&*message)) {
            spdlog::info("node {}: {}", rank, shutdown->reason);
            end = SessionEnd::head_shutdown;
            break;
        }
        if (const auto* reject = std::get_if<node::Reject>(&*message)) {
            spdlog::warn("node {}: the head refused a message: {}", rank, reject->reason);
        }
        if (const auto* control = std::get_if<node::ProcessControl>(&*message)) {
            if (control->session != session) continue;  // an earlier head's
            (*pipeline)->control_processes(control->processes, control->start, control->reason);
        }
    }
    report(false, end == SessionEnd::rejoin ? "joining the head again" : "stopping");
    (*pipeline)->stop();
    if (end != SessionEnd::rejoin) {
        link.send(node::Leave{.session = session,
                              .node_rank = rank,
                              .reason = end == SessionEnd::stopped ? "stopped" : "head shut down"});
    }
    return end;
}

}  // namespace

Status run_node_agent(const NodeAgentOptions& options, const std::atomic<bool>& stop) {
    if (options.nnodes < 2 || options.node_rank < 1 || options.node_rank >= options.nnodes) {
        return fail(ErrorCode::invalid_argument,
                    "--node-rank must be 1..--nnodes-1 on a node other than the head (got rank " +
                        std::to_string(options.node_rank) + " of " +
                        std::to_string(options.nnodes) + ")");
    }
    if (options.address.empty()) {
        return fail(ErrorCode::invalid_argument,
                    "node " + std::to_string(options.node_rank) +
                        " needs its address (--node-addr): its stage endpoints bind there");
    }
    if (options.heartbeat_interval.count() <= 0 || options.join_timeout.count() <= 0) {
        return fail(ErrorCode::invalid_argument, "node agent: intervals must be positive");
    }
    zmq::context_t context(1);
    while (!stop) {
        Link link(context, options.head_endpoint);
        link.send(node::Join{.nnodes = options.nnodes,
                             .node_rank = options.node_rank,
                             .address = options.address,
                             .pid = getpid()});
        spdlog::info("node {}: joining the head at {}", options.node_rank, options.head_endpoint);
        if (options.status) {
            options.status->set({.detail = "waiting for the head at " + options.head_endpoint});
        }
        const auto deadline = Clock::now() + options.join_timeout;
        std::optional<node::Welcome> welcome;
        while (!stop && !welcome && Clock::now() < deadline) {
            auto message = link.receive(kPollInterval);
            if (!message) continue;
            if (auto* accepted = std::get_if<node::Welcome>(&*message)) {
                welcome = std::move(*accepted);
            } else if (const auto* reject = std::get_if<node::Reject>(&*message)) {
                return fail(ErrorCode::failed_precondition,
                            "the head at " + options.head_endpoint + " refused node " +
                                std::to_string(options.node_rank) + ": " + reject->reason);
            }
        }
        if (stop) return ok_status();
        if (!welcome) {
            return fail(ErrorCode::deadline_exceeded,
                        "no head answered at " + options.head_endpoint + " within " +
                            fmt::format("{:g}", options.join_timeout.count() / 1000.0) + " s");
        }
        OMNI_TRY(SessionEnd end, run_session(options, link, *welcome, stop));
        if (end == SessionEnd::head_shutdown) return ok_status();
    }
    return ok_status();
}

}  // namespace omnirt::runner

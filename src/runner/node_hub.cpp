#include "runner/node_hub.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "runner/node_protocol.h"
#include "runner/plan_codec.h"

namespace omnirt::runner {
namespace {

using Clock = std::chrono::steady_clock;
// How long the IO thread waits for a message before it looks at its timers and requests.
constexpr std::chrono::milliseconds kPollInterval{50};

struct NodeRecord {
    std::string routing_id;  // the ZMQ identity of its agent's socket
    std::string address;
    std::int64_t pid = 0;  // its omnirt process
    bool joined = false;
    bool welcomed = false;  // the plan was sent to this incarnation
    // Heard from since the welcome. Until then it is starting its stages (which may take long:
    // weights load), and only the head's pipeline start-up bounds it, not node_timeout.
    bool heard = false;
    bool missing = false;
    std::string reason;
    Clock::time_point last_seen;
};

// What the IO thread reports to the coordinator once the lock is released.
struct CoordinatorCall {
    std::vector<std::string> stages;
    std::string reason;  // non-empty: down
    pipeline::StageState state = pipeline::StageState::restarting;
    std::int64_t pid = 0;  // restarted
};

std::uint64_t random_session() {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device();
}

// A process_control for node `node` (0: the head's own processes).
struct ControlAction {
    int node = 0;
    std::vector<std::string> processes;
    bool start = false;
    std::string reason;
};

}  // namespace

struct NodeHub::State {
    NodeHubOptions options;
    zmq::context_t context{1};
    zmq::socket_t socket;
    std::string endpoint;
    std::uint64_t session = random_session();
    std::thread thread;

    mutable std::mutex mutex;
    std::condition_variable changed;
    std::vector<NodeRecord> records;  // index = rank; [0] is the head
    std::shared_ptr<const config::RuntimePlan> plan;
    std::vector<std::uint8_t> plan_bytes;
    pipeline::Coordinator* coordinator = nullptr;
    bool stop_requested = false;
    bool stopped = false;
    std::chrono::milliseconds grace{0};
    // TP stages over several nodes whose ranks are held down (a node of theirs went missing).
    std::set<std::string> held_groups;
    std::vector<ControlAction> controls;       // to send or run once the lock is released
    LocalProcessControl local_control;         // the head's own processes
    std::vector<ControlAction> local_pending;  // asked for before set_local_control

    std::string label_locked(int rank) const {
        const auto& address = records[static_cast<std::size_t>(rank)].address;
        return config::node_label(rank, address, plan ? plan->node_names : options.node_names);
    }

    void run() {
        pthread_setname_np(pthread_self(), "omnirt-nodehub");
        auto next_heartbeat = Clock::now();
        bool shutdown_sent = false;
        Clock::time_point stop_deadline;
        while (true) {
            std::vector<std::pair<std::string, node::NodeMessage>> outgoing;
            {
                std::lock_guard lock(mutex);
                if (stop_requested && !shutdown_sent) {
                    shutdown_sent = true;
                    stop_deadline = Clock::now() + grace;
                    for (std::size_t rank = 1; rank < records.size(); ++rank) {
                        if (records[rank].joined) {
                            outgoing.emplace_back(records[rank].routing_id,
                                                  node::Shutdown{"the head is shutting down"});
                        }
                    }
                }
                if (shutdown_sent) {
                    bool any_joined = false;
                    for (std::size_t rank = 1; rank < records.size(); ++rank) {
                        any_joined = any_joined || records[rank].joined;
                    }
                    if (!any_joined || Clock::now() >= stop_deadline) break;
                }
            }
            for (auto& [to, message] : outgoing) send(to, message);
            std::vector<CoordinatorCall> calls;
            if (!shutdown_sent) {
                send_welcomes();
                if (Clock::now() >= next_heartbeat) {
                    next_heartbeat = Clock::now() + options.heartbeat_interval;
                    heartbeat_and_check(calls);
                }
            }
            zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
            zmq::poll(&item, 1, kPollInterval);
            for (int budget = 0; budget < 256; ++budget) {
                zmq::message_t identity;
                if (!socket.recv(identity, zmq::recv_flags::dontwait)) break;
                std::vector<zmq::message_t> frames;
                while (true) {
                    int more = socket.get(zmq::sockopt::rcvmore);
                    if (!more) break;
                    zmq::message_t frame;
                    if (!socket.recv(frame, zmq::recv_flags::none)) break;
                    frames.push_back(std::move(frame));
                }
                const std::string from = identity.to_string();
                if (frames.size() != 1) {
                    send(from, node::Reject{"node message: expected one frame, got " +
                                            std::to_string(frames.size())});
                    continue;
                }
                auto message = node::decode_node_message(std::span(
                    static_cast<const std::uint8_t*>(frames[0].data()), frames[0].size()));
                if (!message) {
                    spdlog::warn("node hub: {}", message.error().message);
                    send(from, node::Reject{message.error().message});
                    continue;
                }
                handle(from, *message, calls, shutdown_sent);
            }
            call_coordinator(calls);
            run_controls();
        }
        socket.close();
        std::lock_guard lock(mutex);
        stopped = true;
        changed.notify_all();
    }

    void send(const std::string& to, const node::NodeMessage& message) {
        auto bytes = node::encode_node_message(message);
        if (!bytes) {
            spdlog::error("node hub: encoding '{}': {}", node::message_type(message),
                          bytes.error().message);
            return;
        }
        try {
            socket.send(zmq::buffer(to), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
            socket.send(zmq::buffer(*bytes), zmq::send_flags::dontwait);
        } catch (const zmq::error_t& error) {
            spdlog::debug("node hub: sending '{}': {}", node::message_type(message), error.what());
        }
    }

    // The processes of node `rank` in the plan that report their stages (name -> stages): all
    // but TP follower ranks, whose stage the coordinator hears of through rank 0.
    std::map<std::string, std::vector<std::string>> processes_of(int rank) const {
        std::map<std::string, std::vector<std::string>> out;
        if (!plan) return out;
        for (const auto& process : plan->processes) {
            if (process.tp && process.tp->rank > 0) continue;
            if (process.node == rank) out[process.name] = process.stages;
        }
        return out;
    }

    [[nodiscard]] bool stage_on_node(const config::StagePlan& stage, int rank) const {
        const auto nodes = plan->nodes_of_stage(stage);
        return std::find(nodes.begin(), nodes.end(), rank) != nodes.end();
    }

    // TP stages with ranks on several nodes, one of them `rank`.
    std::vector<const config::StagePlan*> spread_tp_stages_on(int rank) const {
        std::vector<const config::StagePlan*> out;
        if (!plan) return out;
        for (const auto& stage : plan->stages) {
            if (stage.tp_size > 1 && plan->nodes_of_stage(stage).size() > 1 &&
                stage_on_node(stage, rank)) {
                out.push_back(&stage);
            }
        }
        return out;
    }

    // The processes of `stage` on node `rank`.
    std::vector<std::string> stage_processes_on(const config::StagePlan& stage, int rank) const {
        std::vector<std::string> out;
        for (const auto& name : stage.processes) {
            const config::ProcessPlan* process = plan->find_process(name);
            if (process != nullptr && process->node == rank) out.push_back(name);
        }
        return out;
    }

    // Node `rank` (lock held) went missing: the ranks of its spread TP stages stop on every
    // other node and stay down until all of the stage's nodes are back.
    void hold_groups_locked(int rank) {
        for (const config::StagePlan* stage : spread_tp_stages_on(rank)) {
            if (!held_groups.insert(stage->name).second) continue;
            const std::string reason = "stage '" + stage->name + "' lost its ranks on " +
                                       label_locked(rank) + "; its ranks are held down";
            spdlog::warn("node hub: {}", reason);
            for (int node : plan->nodes_of_stage(*stage)) {
                if (node == rank) continue;
                controls.push_back({.node = node,
                                    .processes = stage_processes_on(*stage, node),
                                    .start = false,
                                    .reason = reason});
            }
        }
    }

    // Node `rank` (lock held) is back (`fresh`: it joined again and its plan starts its own
    // processes): every held TP stage of it whose nodes are all back starts afresh on its other
    // nodes (and on `rank` too when the node kept its old processes).
    void release_groups_locked(int rank, bool fresh) {
        for (const config::StagePlan* stage : spread_tp_stages_on(rank)) {
            if (!held_groups.contains(stage->name)) continue;
            const auto nodes = plan->nodes_of_stage(*stage);
            const bool all_back = std::all_of(nodes.begin(), nodes.end(), [&](int node) {
                const NodeRecord& record = records[static_cast<std::size_t>(node)];
                return node == 0 || node == rank || (record.joined && !record.missing);
            });
            if (!all_back) continue;
            held_groups.erase(stage->name);
            const std::string reason = "every node of stage '" + stage->name + "' is back (" +
                                       label_locked(rank) + " last)";
            spdlog::info("node hub: {}: starting its ranks afresh", reason);
            for (int node : nodes) {
                if (node == rank && fresh) continue;
                controls.push_back({.node = node,
                                    .processes = stage_processes_on(*stage, node),
                                    .start = true,
                                    .reason = reason});
            }
        }
    }

    // Sends (or, for the head, runs) the queued process controls; IO thread, lock not held.
    void run_controls() {
        std::vector<ControlAction> actions;
        std::vector<std::pair<std::string, node::NodeMessage>> outgoing;
        LocalProcessControl local;
        {
            std::lock_guard lock(mutex);
            actions = std::exchange(controls, {});
            local = local_control;
            for (auto& action : actions) {
                if (action.processes.empty()) continue;
                if (action.node == 0) {
                    if (!local) local_pending.push_back(action);
                    continue;
                }
                const NodeRecord& record = records[static_cast<std::size_t>(action.node)];
                if (!record.joined) continue;  // its processes went with it
                outgoing.emplace_back(record.routing_id,
                                      node::ProcessControl{.session = session,
                                                           .processes = action.processes,
                                                           .start = action.start,
                                                           .reason = action.reason});
            }
        }
        for (auto& action : actions) {
            if (action.node == 0 && local && !action.processes.empty()) {
                local(action.processes, action.start, action.reason);
            }
        }
        for (auto& [to, message] : outgoing) send(to, message);
    }

    std::vector<std::string> stages_of(int rank) const {
        std::vector<std::string> out;
        if (!plan) return out;
        for (const auto& stage : plan->stages) {
            // The coordinator knows a replicated stage by its replicas' names; the replicas of
            // one stage may run on several nodes (`node: [...]`).
            if (stage.replicas < 2) {
                // A TP stage is down when any node of its ranks is.
                if (stage_on_node(stage, rank)) out.push_back(stage.name);
                continue;
            }
            for (int k = 0; k < stage.replicas; ++k) {
                if (config::replica_node(*plan, stage, k) == rank) {
                    out.push_back(config::replica_name(stage.name, k));
                }
            }
        }
        return out;
    }

    // Whether node `rank` runs (a process of) a name the coordinator uses: a stage (a TP
    // stage's ranks may be on several nodes), or a replica "{stage}.r{k}".
    bool instance_on_node(const std::string& name, int rank) const {
        if (const config::StagePlan* stage = plan->find_stage(name)) {
            return stage_on_node(*stage, rank);
        }
        return node_of_replica_instance(name) == rank;
    }

    // The node of a replica "{stage}.r{k}"; nullopt for a name the plan does not have.
    std::optional<int> node_of_replica_instance(const std::string& name) const {
        const std::size_t dot = name.rfind(".r");
        if (dot == std::string::npos || dot + 2 >= name.size() || name.size() - dot > 6 ||
            name.find_first_not_of("0123456789", dot + 2) != std::string::npos) {
            return std::nullopt;
        }
        const config::StagePlan* stage = plan->find_stage(name.substr(0, dot));
        const int replica = std::stoi(name.substr(dot + 2));
        if (stage == nullptr || stage->replicas < 2 || replica >= stage->replicas) {
            return std::nullopt;
        }
        return config::replica_node(*plan, *stage, replica);
    }

    // Marks node `rank` missing (lock held): its stages restarting, requests through them failed.
    void lose_locked(int rank, const std::string& why, std::vector<CoordinatorCall>& calls) {
        NodeRecord& record = records[static_cast<std::size_t>(rank)];
        if (record.missing) return;
        record.missing = true;
        record.reason = label_locked(rank) + " is missing: " + why;
        spdlog::error("node hub: {}", record.reason);
        if (!plan) return;
        calls.push_back({.stages = stages_of(rank), .reason = record.reason});
        hold_groups_locked(rank);
    }

    void send_welcomes() {
        std::vector<std::pair<std::string, node::NodeMessage>> outgoing;
        {
            std::lock_guard lock(mutex);
            if (!plan) return;
            for (auto& record : records) {
                if (!record.joined || record.welcomed || &record == &records[0]) continue;
                record.welcomed = true;
                record.heard = false;
                record.last_seen = Clock::now();
                // A node that joined again starts its own ranks with the plan; the other
                // nodes' ranks of its TP stages start afresh alongside.
                if (record.missing)
                    release_groups_locked(static_cast<int>(&record - &records[0]), true);
                outgoing.emplace_back(record.routing_id, node::Welcome{.session = session,
                                                                       .plan = plan_bytes,
                                                                       .restart = options.restart});
            }
        }
        for (auto& [to, message] : outgoing) send(to, message);
    }

    void heartbeat_and_check(std::vector<CoordinatorCall>& calls) {
        std::vector<std::string> to;
        {
            std::lock_guard lock(mutex);
            const auto now = Clock::now();
            for (std::size_t rank = 1; rank < records.size(); ++rank) {
                NodeRecord& record = records[rank];
                if (!record.joined) continue;
                to.push_back(record.routing_id);
                if (record.welcomed && record.heard && !record.missing &&
                    now - record.last_seen > options.node_timeout) {
                    auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(
                        now - record.last_seen);
                    lose_locked(static_cast<int>(rank),
                                "no word from it for " + std::to_string(silent.count()) +
                                    " ms (its link or its omnirt is down)",
                                calls);
                }
            }
        }
        for (const auto& id : to) send(id, node::HubHeartbeat{session});
    }

    void handle(const std::string& from, const node::NodeMessage& message,
                std::vector<CoordinatorCall>& calls, bool shutting_down) {
        if (const auto* join = std::get_if<node::Join>(&message)) {
            on_join(from, *join, calls, shutting_down);
            return;
        }
        if (std::holds_alternative<node::Welcome>(message) ||
            std::holds_alternative<node::Reject>(message) ||
            std::holds_alternative<node::HubHeartbeat>(message) ||
            std::holds_alternative<node::Rejoin>(message) ||
            std::holds_alternative<node::Shutdown>(message) ||
            std::holds_alternative<node::ProcessControl>(message)) {
            send(from, node::Reject{"node message: '" + std::string(node::message_type(message)) +
                                    "' is sent by the head, not to it"});
            return;
        }
        // The rest come from a joined node of this session.
        std::uint64_t session_of = 0;
        int rank = 0;
        std::visit(
            [&](const auto& m) {
                if constexpr (requires {
                                  m.session;
                                  m.node_rank;
                              }) {
                    session_of = m.session;
                    rank = m.node_rank;
                }
            },
            message);
        std::lock_guard lock(mutex);
        if (session_of != session || rank <= 0 || rank >= options.nnodes ||
            records[static_cast<std::size_t>(rank)].routing_id != from ||
            !records[static_cast<std::size_t>(rank)].joined) {
            send(from, node::Rejoin{"the head does not know this node's session (it restarted, "
                                    "or another process joined as this rank)"});
            return;
        }
        NodeRecord& record = records[static_cast<std::size_t>(rank)];
        record.last_seen = Clock::now();
        record.heard = record.heard || record.welcomed;
        if (shutting_down) {
            if (std::holds_alternative<node::Leave>(message)) record.joined = false;
            return;
        }
        if (const auto* heartbeat = std::get_if<node::Heartbeat>(&message)) {
            if (!record.missing) return;
            // Heard again: the stages of every process it runs serve again (a process it is
            // still restarting reports itself with stages_restarted).
            spdlog::info("node hub: {} is back", label_locked(rank));
            record.missing = false;
            record.reason.clear();
            release_groups_locked(rank, /*fresh=*/false);
            for (const auto& [process, stages] : processes_of(rank)) {
                auto pid = heartbeat->pids.find(process);
                if (pid != heartbeat->pids.end())
                    calls.push_back({.stages = stages, .pid = pid->second});
            }
        } else if (const auto* down = std::get_if<node::StagesDown>(&message)) {
            auto stages = own_stages(rank, down->stages);
            if (stages.empty()) return;
            calls.push_back({.stages = std::move(stages),
                             .reason = label_locked(rank) + ": " + down->reason,
                             .state = down->restarting ? pipeline::StageState::restarting
                                                       : pipeline::StageState::failed});
        } else if (const auto* restarted = std::get_if<node::StagesRestarted>(&message)) {
            auto stages = own_stages(rank, restarted->stages);
            if (!stages.empty())
                calls.push_back({.stages = std::move(stages), .pid = restarted->pid});
        } else if (const auto* leave = std::get_if<node::Leave>(&message)) {
            record.joined = false;
            lose_locked(rank, "it left (" + leave->reason + ")", calls);
        }
    }

    // The stages of `names` that the plan places on node `rank` (a node reports only its own).
    std::vector<std::string> own_stages(int rank, const std::vector<std::string>& names) const {
        std::vector<std::string> out;
        if (!plan) return out;
        for (const auto& name : names) {
            if (instance_on_node(name, rank)) out.push_back(name);
        }
        return out;
    }

    void on_join(const std::string& from, const node::Join& join,
                 std::vector<CoordinatorCall>& calls, bool shutting_down) {
        auto reject = [&](const std::string& reason) {
            spdlog::warn("node hub: refused a join from pid {} as node {}: {}", join.pid,
                         join.node_rank, reason);
            send(from, node::Reject{reason});
        };
        if (shutting_down) return reject("the head is shutting down");
        if (join.nnodes != options.nnodes) {
            return reject("the node says --nnodes " + std::to_string(join.nnodes) +
                          ", the head runs " + std::to_string(options.nnodes) + " nodes");
        }
        if (join.node_rank == 0)
            return reject("node rank 0 is the head; give this node 1.." +
                          std::to_string(options.nnodes - 1));
        if (join.node_rank >= options.nnodes) {
            return reject("node rank " + std::to_string(join.node_rank) +
                          " is not below --nnodes " + std::to_string(options.nnodes));
        }
        std::lock_guard lock(mutex);
        NodeRecord& record = records[static_cast<std::size_t>(join.node_rank)];
        if (plan) {
            const std::string& placed =
                plan->node_addresses.at(static_cast<std::size_t>(join.node_rank));
            if (join.address != placed) {
                send(from, node::Reject{"node " + std::to_string(join.node_rank) + " joined from " +
                                        join.address +
                                        ", but the running pipeline placed its stages on " +
                                        placed + "; restart the head to place them again"});
                return;
            }
            if (record.joined && record.routing_id != from) {
                lose_locked(
                    join.node_rank,
                    "it joined again as a new process (pid " + std::to_string(join.pid) + ")",
                    calls);
            } else if (!record.joined) {
                lose_locked(join.node_rank, "it left", calls);  // no-op when marked already
            }
        }
        spdlog::info("node hub: node {} joined from {} (pid {})", join.node_rank, join.address,
                     join.pid);
        record.routing_id = from;
        record.address = join.address;
        record.pid = join.pid;
        record.joined = true;
        record.welcomed = false;  // send_welcomes sends the plan once there is one
        record.last_seen = Clock::now();
        changed.notify_all();
    }

    void call_coordinator(std::vector<CoordinatorCall>& calls) {
        pipeline::Coordinator* target = nullptr;
        {
            std::lock_guard lock(mutex);
            target = coordinator;
        }
        if (target == nullptr) return;
        for (auto& call : calls) {
            if (call.stages.empty()) continue;
            if (!call.reason.empty()) {
                target->mark_stages_down(call.stages, call.reason, call.state);
            } else {
                target->mark_stages_restarted(call.stages, call.pid);
            }
        }
        calls.clear();
    }
};

NodeHub::NodeHub(std::unique_ptr<State> state) : state_(std::move(state)) {}

NodeHub::~NodeHub() { stop(std::chrono::milliseconds(0)); }

Result<std::unique_ptr<NodeHub>> NodeHub::create(NodeHubOptions options) {
    if (options.nnodes < 2 || options.nnodes > 1024) {
        return fail(ErrorCode::invalid_argument,
                    "--nnodes must be 2..1024 for a pipeline on several nodes (got " +
                        std::to_string(options.nnodes) + ")");
    }
    if (options.head_address.empty()) {
        return fail(ErrorCode::invalid_argument, "the head needs its own address (--node-addr)");
    }
    if (options.node_names.size() > static_cast<std::size_t>(options.nnodes)) {
        return fail(ErrorCode::invalid_argument,
                    "the config's nodes: names " + std::to_string(options.node_names.size()) +
                        " nodes, but --nnodes is " + std::to_string(options.nnodes) +
                        " (serve it with --nnodes " + std::to_string(options.node_names.size()) +
                        " or more)");
    }
    if (options.heartbeat_interval.count() <= 0 ||
        options.node_timeout <= options.heartbeat_interval) {
        return fail(ErrorCode::invalid_argument,
                    "the node timeout must be longer than the heartbeat interval");
    }
    auto state = std::make_unique<State>();
    state->options = std::move(options);
    state->records.resize(static_cast<std::size_t>(state->options.nnodes));
    state->records[0].address = state->options.head_address;
    state->records[0].joined = true;
    try {
        state->socket = zmq::socket_t(state->context, zmq::socket_type::router);
        state->socket.set(zmq::sockopt::linger, 200);
        state->socket.bind(state->options.bind_endpoint);
        state->endpoint = state->socket.get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& error) {
        return fail(
            ErrorCode::unavailable,
            "node hub: cannot bind '" + state->options.bind_endpoint + "': " + error.what());
    }
    State* raw = state.get();
    state->thread = std::thread([raw] { raw->run(); });
    return std::unique_ptr<NodeHub>(new NodeHub(std::move(state)));
}

std::string NodeHub::endpoint() const { return state_->endpoint; }

Result<std::vector<std::string>> NodeHub::wait_for_nodes(std::chrono::milliseconds timeout) {
    std::unique_lock lock(state_->mutex);
    auto missing = [&] {
        std::vector<int> out;
        for (std::size_t rank = 1; rank < state_->records.size(); ++rank) {
            if (!state_->records[rank].joined) out.push_back(static_cast<int>(rank));
        }
        return out;
    };
    state_->changed.wait_for(lock, timeout, [&] {
        return state_->stopped || state_->stop_requested || missing().empty();
    });
    if (state_->stopped || state_->stop_requested) {
        return fail(ErrorCode::unavailable, "node hub stopped");
    }
    if (auto absent = missing(); !absent.empty()) {
        std::string ranks;
        const auto& names = state_->options.node_names;
        for (int rank : absent) {
            ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
            if (static_cast<std::size_t>(rank) < names.size()) {
                ranks += " (" + names[static_cast<std::size_t>(rank)] + ")";
            }
        }
        return fail(
            ErrorCode::deadline_exceeded,
            "node" + std::string(absent.size() == 1 ? " " : "s ") + ranks +
                " did not join within " + fmt::format("{:g}", timeout.count() / 1000.0) +
                " s (start `omnirt serve --nnodes " + std::to_string(state_->options.nnodes) +
                " --node-rank R --dist-init-addr <head>:<port>` there; the head listens on " +
                state_->endpoint + ")");
    }
    std::vector<std::string> addresses;
    for (const auto& record : state_->records) addresses.push_back(record.address);
    return addresses;
}

Status NodeHub::serve_plan(std::shared_ptr<const config::RuntimePlan> plan,
                           pipeline::Coordinator& coordinator) {
    if (!plan) return fail(ErrorCode::invalid_argument, "node hub: no plan");
    OMNI_TRY(auto bytes, encode_plan(*plan));
    std::lock_guard lock(state_->mutex);
    if (state_->stop_requested) return fail(ErrorCode::unavailable, "node hub stopped");
    if (state_->plan) return fail(ErrorCode::failed_precondition, "node hub: plan served already");
    if (plan->node_addresses.size() != state_->records.size()) {
        return fail(ErrorCode::invalid_argument,
                    "node hub: the plan is for " + std::to_string(plan->node_addresses.size()) +
                        " nodes, the hub has " + std::to_string(state_->records.size()));
    }
    state_->plan = std::move(plan);
    state_->plan_bytes = std::move(bytes);
    state_->coordinator = &coordinator;
    return ok_status();
}

void NodeHub::set_local_control(LocalProcessControl control) {
    std::vector<ControlAction> pending;
    {
        std::lock_guard lock(state_->mutex);
        state_->local_control = control;
        pending = std::exchange(state_->local_pending, {});
    }
    if (!control) return;
    for (const auto& action : pending) control(action.processes, action.start, action.reason);
}

std::vector<NodeStatus> NodeHub::nodes() const {
    std::lock_guard lock(state_->mutex);
    std::vector<NodeStatus> out;
    for (std::size_t rank = 0; rank < state_->records.size(); ++rank) {
        const NodeRecord& record = state_->records[rank];
        out.push_back(NodeStatus{.rank = static_cast<int>(rank),
                                 .address = record.address,
                                 .joined = record.joined,
                                 .missing = record.missing,
                                 .reason = record.reason});
    }
    return out;
}

void NodeHub::stop(std::chrono::milliseconds grace) {
    {
        std::lock_guard lock(state_->mutex);
        if (!state_->stop_requested) {
            state_->stop_requested = true;
            state_->grace = grace;
        }
    }
    state_->changed.notify_all();
    if (state_->thread.joinable()) state_->thread.join();
    std::lock_guard lock(state_->mutex);
    state_->coordinator = nullptr;
}

}  // namespace omnirt::runner

// Stage: construction, lifecycle, statistics and the helpers every stage thread shares.
#include "pipeline/stage.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "pipeline/local_dispatch.h"
#include "pipeline/replica_routing.h"
#include "pipeline/stage_internal.h"
#include "relay/registry.h"
#include "relay/tiered_relay.h"

namespace omnirt::pipeline {
namespace {

template <class Fn>
Result<Fn> resolve(FunctionKind kind, const std::string& name, const std::string& field) {
    auto fn = Registry::global().get<Fn>(kind, name);
    if (!fn) return fail(fn.error().with_context(field));
    return fn;
}

Result<StageFunctions> resolve_functions(const config::StagePlan& plan) {
    StageFunctions functions;
    if (plan.route_fn) {
        OMNI_TRY(functions.route,
                 resolve<RouteFn>(FunctionKind::route, *plan.route_fn, "route_fn"));
    }
    if (plan.stream_done_to_fn) {
        OMNI_TRY(functions.stream_done,
                 resolve<StreamDoneFn>(FunctionKind::stream_done, *plan.stream_done_to_fn,
                                       "stream_done_to_fn"));
    }
    for (const auto& [target, fn_name] : plan.project_payload) {
        OMNI_TRY(auto fn, resolve<ProjectionFn>(FunctionKind::projection, fn_name,
                                                "project_payload." + target));
        functions.projections.emplace(target, std::move(fn));
    }
    return functions;
}

Result<std::unique_ptr<InputHandler>> make_input_handler(const config::StagePlan& plan,
                                                         Tracer* tracer) {
    if (plan.wait_for.empty()) return std::unique_ptr<InputHandler>(new DirectInput());
    if (!plan.merge_fn) {
        return fail(ErrorCode::invalid_argument, "'wait_for' needs a 'merge_fn'");
    }
    AggregatedInputOptions options{.wait_for = plan.wait_for, .tracer = tracer};
    OMNI_TRY(options.merge_fn, resolve<MergeFn>(FunctionKind::merge, *plan.merge_fn, "merge_fn"));
    if (plan.wait_for_fn) {
        OMNI_TRY(options.wait_for_fn,
                 resolve<WaitForFn>(FunctionKind::wait_for, *plan.wait_for_fn, "wait_for_fn"));
    }
    if (!(plan.fan_in_timeout_s > 0) || !std::isfinite(plan.fan_in_timeout_s)) {
        return fail(ErrorCode::invalid_argument, "fan_in_timeout_s must be a positive number");
    }
    options.fan_in_timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(std::ceil(plan.fan_in_timeout_s * 1000.0)));
    OMNI_TRY(auto handler, AggregatedInput::create(std::move(options)));
    return std::unique_ptr<InputHandler>(std::move(handler));
}

// `name` tells the relays of one process apart (its shared memory segments): the stage, or
// the replica ("{stage}.r{k}") when one process hosts several replicas (in-process placement).
// `replica` is the one this relay serves: its node decides which peers are remote.
Result<std::unique_ptr<relay::Relay>> make_relay(const config::RuntimePlan& plan,
                                                 const config::StagePlan& stage, int replica,
                                                 const std::string& name) {
    OMNI_TRY(Device device, parse_device(stage.relay.device.empty() ? "cpu" : stage.relay.device));
    if (!(stage.relay.slot_size_mb > 0) || !std::isfinite(stage.relay.slot_size_mb)) {
        return fail(ErrorCode::invalid_argument, "relay slot_size_mb must be a positive number");
    }
    relay::RelayOptions options{
        .backend = stage.relay.backend.empty() ? plan.relay_backend : stage.relay.backend,
        .name = name,
        .runtime_dir = plan.runtime_dir,
        .device = device,
        .slot_bytes = static_cast<std::size_t>(std::ceil(stage.relay.slot_size_mb * 1048576.0)),
        .credits = stage.relay.credits,
        .rank = stage.relay.rank,
        .world_size = stage.relay.world_size,
        .rendezvous = plan.relay_rendezvous,
        .zero_copy = true,
    };
    OMNI_TRY(auto local, relay::create_relay(options));
    if (plan.remote_relay_backend.empty() || plan.remote_relay_backend == options.backend) {
        return local;
    }
    // Several nodes: edges to and from stages (replicas) on other nodes go through the remote
    // backend.
    const int own_node = config::replica_node(plan, stage, replica);
    std::set<std::int64_t> remote_ranks;
    bool remote_edges = false;
    bool local_sends = false;
    bool remote_sends = false;
    for (const auto& edge : plan.edges) {
        if (edge.from != stage.name && edge.to != stage.name) continue;
        const config::StagePlan* peer =
            plan.find_stage(edge.from == stage.name ? edge.to : edge.from);
        if (peer == nullptr || edge.tier == "local") continue;
        for (int k = 0; k < std::max(peer->replicas, 1); ++k) {
            const bool remote = config::replica_node(plan, *peer, k) != own_node;
            remote_edges = remote_edges || remote;
            if (remote) remote_ranks.insert(config::replica_relay_rank(plan, *peer, k));
            if (edge.from == stage.name) (remote ? remote_sends : local_sends) = true;
        }
    }
    if (!remote_edges) return local;
    relay::RelayOptions remote_options = options;
    remote_options.backend = plan.remote_relay_backend;
    remote_options.device = Device::cpu();  // between hosts the relay moves host memory
    OMNI_TRY(auto remote, relay::create_relay(remote_options));
    using SendBuffers = relay::TieredRelayOptions::SendBuffers;
    return relay::create_tiered_relay({.local = std::move(local),
                                       .remote = std::move(remote),
                                       .remote_ranks = std::move(remote_ranks),
                                       .send_buffers = local_sends && remote_sends
                                                           ? SendBuffers::host
                                                       : remote_sends ? SendBuffers::remote
                                                                      : SendBuffers::local});
}

}  // namespace

Result<std::unique_ptr<Stage>> Stage::create(StageOptions options,
                                             std::unique_ptr<Scheduler> scheduler,
                                             std::shared_ptr<Tracer> tracer) {
    if (!options.plan) return fail(ErrorCode::invalid_argument, "stage options have no plan");
    if (!scheduler) return fail(ErrorCode::invalid_argument, "stage needs a scheduler");
    if (options.heartbeat_interval.count() <= 0 || options.relay_timeout.count() <= 0) {
        return fail(ErrorCode::invalid_argument,
                    "stage heartbeat_interval and relay_timeout must be positive");
    }
    if (!tracer) tracer = std::make_shared<Tracer>(options.stage_name);
    const config::StagePlan* plan = options.plan->find_stage(options.stage_name);
    if (plan == nullptr) {
        return fail(ErrorCode::not_found, "stage '" + options.stage_name + "' is not in the plan");
    }
    auto context = [&](const Error& error) {
        return fail(error.with_context("stage '" + plan->name + "'"));
    };
    auto state = std::make_unique<State>();
    state->plan = plan;
    state->name = plan->name;
    auto functions = resolve_functions(*plan);
    if (!functions) return context(functions.error());
    state->functions = std::move(*functions);
    auto input = make_input_handler(*plan, tracer.get());
    if (!input) return context(input.error());
    state->input = std::move(*input);
    state->inline_input = !state->input->aggregates();
    state->next = {plan->next.begin(), plan->next.end()};
    state->stream_to = {plan->stream_to.begin(), plan->stream_to.end()};
    for (const auto& other : options.plan->stages) {
        state->endpoints.emplace(other.name, other.endpoint);
        std::vector<std::int64_t> other_ranks;
        for (int k = 0; k < std::max(other.replicas, 1); ++k) {
            other_ranks.push_back(config::replica_relay_rank(*options.plan, other, k));
        }
        state->ranks.emplace(other.name, std::move(other_ranks));
        const bool target =
            state->next.contains(other.name) || state->stream_to.contains(other.name);
        if (other.replicas > 1) state->carries_routes = true;
        if (other.replicas > 1 && target) {
            state->replica_endpoints.emplace(other.name, other.replica_endpoints);
        }
    }
    if (options.replica < 0 || options.replica >= std::max(plan->replicas, 1)) {
        return context(Error{ErrorCode::invalid_argument,
                             "replica " + std::to_string(options.replica) + " of " +
                                 std::to_string(plan->replicas) + " is out of range"});
    }
    state->instance =
        plan->replicas > 1 ? config::replica_name(plan->name, options.replica) : plan->name;
    auto relay = make_relay(*options.plan, *plan, options.replica, state->instance);
    if (!relay) return context(relay.error().with_context("creating the relay"));
    state->relay = std::move(*relay);
    state->options = std::move(options);
    state->scheduler = std::move(scheduler);
    state->tracer = std::move(tracer);
    auto stage = std::unique_ptr<Stage>(new Stage(std::move(state)));
    stage->state_->self = stage.get();
    return stage;
}

Stage::Stage(std::unique_ptr<State> state) : state_(std::move(state)) {}

Stage::~Stage() { stop(); }

Status Stage::start() {
    State& s = *state_;
    std::lock_guard lock(s.lifecycle_mutex);
    if (s.started || s.stopped) {
        return fail(ErrorCode::failed_precondition,
                    "stage '" + s.name + "' was already " + (s.stopped ? "stopped" : "started"));
    }
    s.started = true;
    auto failed = [&](const Error& error) {
        return fail(error.with_context("stage '" + s.name + "': start"));
    };
    auto control = control::ControlPlane::create();
    if (!control) return failed(control.error());
    s.control = std::move(*control);
    // Blocks only when the stage thread is kEventQueueCapacity events behind.
    auto handler = [state = &s](proto::ControlMessage message) {
        state->deliver_event(StageEvent(std::move(message)));
    };
    const std::string& endpoint =
        s.plan->replicas > 1 ? s.plan->replica_endpoints.at(s.options.replica) : s.plan->endpoint;
    if (auto bound = s.control->bind_pull(endpoint, handler); !bound) {
        return failed(bound.error());
    }
    if (auto status = s.control->subscribe(s.options.plan->abort_endpoint, handler); !status) {
        return failed(status.error());
    }
    if (auto status = s.control->start(); !status) return failed(status.error());
    if (s.options.local != nullptr) {
        s.options.local->add(this);
        s.registered_local = true;
    }
    s.scheduler->set_output_sink([state = &s](OutgoingMessage message) {
        return state->deliver_output(std::move(message));
    });
    if (auto status = s.scheduler->start(); !status) return failed(status.error());
    s.stage_thread = std::thread([&s] { s.run_stage_thread(); });
    s.output_thread = std::thread([&s] { s.run_output_thread(); });
    s.put_thread = std::thread([&s] { s.run_put_waiter(); });
    s.send_heartbeat();
    return ok_status();
}

void Stage::stop() {
    State& s = *state_;
    std::lock_guard lock(s.lifecycle_mutex);
    if (s.stopped) return;
    s.stopped = true;
    if (s.registered_local) s.options.local->remove(s.name);
    // Order: the stage thread ends after the event it is handling (a full scheduler inbox or a
    // relay wait cannot hold it: both are closed first); the relay closes before the scheduler
    // stops so that an output thread blocked on credits (a receiver that is gone) wakes up; the
    // control plane goes last, so that what the threads sent is flushed. Events still queued
    // are dropped.
    s.stopping.store(true);
    // First, so that a computation running inline on the control IO thread (try_run_here)
    // notices the stop instead of making the joins below wait for it.
    s.scheduler->begin_stop();
    s.events.close();
    s.scheduler->inbox().close();
    s.relay->close();
    if (s.stage_thread.joinable()) s.stage_thread.join();
    {
        // An event being handled inline finishes; later ones see `stopping` and are dropped.
        std::lock_guard barrier(s.input_mutex);
    }
    s.scheduler->stop();
    s.scheduler->outbox().close();  // in case the scheduler never started
    if (s.output_thread.joinable()) s.output_thread.join();
    s.puts.close();
    if (s.put_thread.joinable()) s.put_thread.join();
    if (s.control) s.control->stop();
    std::lock_guard book_lock(s.book_mutex);
    s.book.active.clear();
    s.book.counters.clear();
}

bool Stage::shutdown_requested() const { return state_->shutdown_requested.load(); }

const std::string& Stage::name() const { return state_->name; }

StageStats Stage::stats() const { return state_->stats(); }

void Stage::receive_local_payload(const std::string& from_stage,
                                  std::shared_ptr<const StagePayload> payload) {
    if (!payload) return;
    state_->deliver_event(LocalPayloadEvent{from_stage, std::move(payload)});
}

void Stage::receive_local_stream(const std::string& from_stage, const std::string& request_id,
                                 std::shared_ptr<const StreamChunk> chunk) {
    if (!chunk) return;
    state_->deliver_event(LocalChunkEvent{from_stage, request_id, std::move(chunk)});
}

void Stage::receive_local_stream_signal(const std::string& from_stage,
                                        const std::string& request_id, bool done,
                                        std::optional<std::string> error) {
    state_->deliver_event(LocalSignalEvent{from_stage, request_id, done, std::move(error)});
}

// --- shared helpers ---

StageStats Stage::State::stats() const {
    StageStats out;
    std::int64_t active = 0;
    {
        std::lock_guard lock(book_mutex);
        active = static_cast<std::int64_t>(book.active.size());
    }
    out.pending_fan_in = pending_fan_in.load();
    out.active_requests = active + out.pending_fan_in;
    out.queue_depth = static_cast<std::int64_t>(scheduler->inbox().size());
    out.processed = processed.load();
    out.relay_puts = relay_puts.load();
    out.relay_gets = relay_gets.load();
    out.local_dispatches = local_dispatches.load();
    out.dropped_messages = dropped_messages.load();
    out.compute_time = scheduler->compute_time();
    out.edges = edge_traffic.snapshot();
    return out;
}

bool Stage::State::is_closed(const std::string& request_id) const {
    std::lock_guard lock(book_mutex);
    return book.closed(request_id);
}

void Stage::State::send(const std::string& endpoint, const proto::ControlMessage& message) {
    if (!control) return;
    if (auto status = control->send(endpoint, message); !status) {
        spdlog::warn("stage '{}': cannot send {} for request '{}' to {}: {}", name,
                     proto::message_type_name(message), proto::request_id_of(message), endpoint,
                     status.error().to_string());
    }
}

void Stage::State::send_to_coordinator(const proto::ControlMessage& message) {
    send(options.plan->coordinator_endpoint, message);
}

void Stage::State::send_stream_signal(const std::string& target, const std::string& request_id,
                                      bool done, std::optional<std::string> error) {
    if (options.local != nullptr) {  // counted first, as in send_payload
        local_dispatches.fetch_add(1);
        if (options.local->send_stream_signal(target, name, request_id, done, error)) return;
        local_dispatches.fetch_sub(1);
    }
    auto destination = destination_of(target, request_id);
    if (!destination) {
        // Only an abort can take a request's routes away meanwhile; it reaches the target too.
        spdlog::warn("stage '{}': no stream signal for request '{}': {}", name, request_id,
                     destination.error().message);
        return;
    }
    send(destination->endpoint, proto::DataReadyMessage{.request_id = request_id,
                                                        .from_stage = name,
                                                        .to_stage = target,
                                                        .is_done = done,
                                                        .error = std::move(error)});
}

Result<Stage::State::Destination> Stage::State::destination_of(
    const std::string& target, const std::string& request_id) const {
    const std::vector<std::int64_t>& target_ranks = ranks.at(target);
    auto replicas = replica_endpoints.find(target);
    if (replicas == replica_endpoints.end()) {
        return Destination{.endpoint = endpoints.at(target), .rank = target_ranks.front()};
    }
    std::lock_guard lock(book_mutex);
    auto routes = book.routes.find(request_id);
    auto route = routes != book.routes.end() ? routes->second.find(target)
                                             : std::map<std::string, int>::const_iterator{};
    if (routes == book.routes.end() || route == routes->second.end()) {
        return fail(ErrorCode::failed_precondition,
                    "stage '" + target + "' runs " + std::to_string(replicas->second.size()) +
                        " replicas and the request names none (metadata." + kReplicaRoutesKey +
                        " is set by the coordinator)");
    }
    if (route->second < 0 || static_cast<std::size_t>(route->second) >= replicas->second.size()) {
        return fail(ErrorCode::invalid_argument, "replica " + std::to_string(route->second) +
                                                     " of stage '" + target + "' does not exist (" +
                                                     std::to_string(replicas->second.size()) +
                                                     " replicas)");
    }
    const auto replica = static_cast<std::size_t>(route->second);
    return Destination{.endpoint = replicas->second[replica],
                       .rank = target_ranks.at(std::min(replica, target_ranks.size() - 1))};
}

void Stage::State::record_routes(const std::string& request_id, const StagePayload& payload) {
    if (!carries_routes) return;
    std::map<std::string, int> routes = replica_routes(payload.request.metadata);
    if (routes.empty()) return;
    std::lock_guard lock(book_mutex);
    if (book.closed(request_id)) return;
    book.routes.emplace(request_id, std::move(routes));
}

void Stage::State::forget_routes(const std::string& request_id) {
    if (!carries_routes) return;
    std::lock_guard lock(book_mutex);
    book.routes.erase(request_id);
}

std::shared_ptr<const StagePayload> Stage::State::with_routes(
    std::shared_ptr<const StagePayload> payload) const {
    if (!carries_routes || !replica_routes(payload->request.metadata).empty()) return payload;
    std::map<std::string, int> routes;
    {
        std::lock_guard lock(book_mutex);
        auto it = book.routes.find(payload->request_id);
        if (it == book.routes.end()) return payload;
        routes = it->second;
    }
    StagePayload copy = *payload;
    if (!set_replica_routes(copy.request, routes)) return payload;  // metadata is no map
    return std::make_shared<const StagePayload>(std::move(copy));
}

void Stage::State::drop_request(const std::string& request_id) {
    {
        std::lock_guard lock(book_mutex);
        book.dropped.insert(request_id);
        book.forget(request_id);
    }
    scheduler->abort(request_id);
    relay->cleanup(request_id);
    forget_routes(request_id);
}

void Stage::State::fail_request(const std::string& request_id, const Error& error) {
    {
        std::lock_guard lock(book_mutex);
        if (book.dropped.contains(request_id)) return;  // reported or aborted already
        book.dropped.insert(request_id);
        book.forget(request_id);
    }
    Error reported = error.with_context("stage '" + name + "'");
    spdlog::warn("request '{}' failed: {}", request_id, reported.to_string());
    scheduler->abort(request_id);
    relay->cleanup(request_id);
    for (const auto& target : stream_to) {
        send_stream_signal(target, request_id, false, reported.message);
    }
    forget_routes(request_id);
    send_to_coordinator(proto::CompleteMessage{
        .request_id = request_id, .from_stage = name, .ok = false, .error = reported});
}

void Stage::State::send_heartbeat() {
    StageStats now = stats();
    const SchedulerLoad load = scheduler->load();
    send_to_coordinator(proto::HeartbeatMessage{
        .stage = instance,
        .pid = static_cast<std::int64_t>(::getpid()),
        .queue_depth = now.queue_depth + now.pending_fan_in,
        .active_requests = now.active_requests,
        .processed = now.processed,
        .compute_ns = now.compute_time.count(),
        .edges = std::move(now.edges),
        .kv_blocks_used = load.kv_blocks_used,
        .kv_blocks_total = load.kv_blocks_total,
        .paused_requests = load.paused_requests,
        .generated_tokens = load.generated_tokens,
    });
}

}  // namespace omnirt::pipeline

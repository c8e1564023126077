// Coordinator life cycle: creation and validation, start (sockets, IO and timer threads), the
// deadline timer, stop, and the public methods that forward to CoordinatorCore.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "config/runtime_plan.h"
#include "pipeline/coordinator.h"
#include "pipeline/coordinator_internal.h"

namespace omnirt::pipeline {

std::string_view to_string(RequestState state) {
    switch (state) {
        case RequestState::pending:
            return "pending";
        case RequestState::running:
            return "running";
        case RequestState::completed:
            return "completed";
        case RequestState::failed:
            return "failed";
        case RequestState::aborted:
            return "aborted";
    }
    return "unknown";
}

std::string_view to_string(StageState state) {
    switch (state) {
        case StageState::running:
            return "running";
        case StageState::restarting:
            return "restarting";
        case StageState::failed:
            return "failed";
    }
    return "unknown";
}

namespace detail {
namespace {

// How long stop() lets queued shutdown messages reach the stages.
constexpr Duration kStopLinger = Duration(1000);

Status validate(const CoordinatorOptions& options) {
    auto invalid = [](std::string message) {
        return fail(ErrorCode::invalid_argument, "coordinator: " + std::move(message));
    };
    if (options.coordinator_endpoint.empty()) return invalid("coordinator_endpoint is empty");
    if (options.abort_endpoint.empty()) return invalid("abort_endpoint is empty");
    if (options.stage_endpoints.empty()) return invalid("stage_endpoints is empty");
    for (const auto& [stage, endpoint] : options.stage_endpoints) {
        if (stage.empty()) return invalid("a stage endpoint has an empty stage name");
        if (endpoint.empty()) return invalid("stage '" + stage + "' has an empty endpoint");
    }
    if (!options.stage_endpoints.contains(options.entry_stage)) {
        return invalid("entry stage '" + options.entry_stage + "' has no endpoint");
    }
    if (options.terminal_stages.empty() && !options.terminal_stages_fn) {
        return invalid("no terminal stages and no terminal_stages_fn");
    }
    for (const auto& stage : options.terminal_stages) {
        if (!options.stage_endpoints.contains(stage)) {
            return invalid("terminal stage '" + stage + "' has no endpoint");
        }
    }
    std::map<std::string, std::size_t> group_sizes;
    for (const auto& [stage, endpoints] : options.replica_endpoints) {
        if (!options.stage_endpoints.contains(stage)) {
            return invalid("replicated stage '" + stage + "' has no stage endpoint");
        }
        if (endpoints.size() < 2)
            return invalid("stage '" + stage + "' lists fewer than 2 replicas");
        for (const auto& endpoint : endpoints) {
            if (endpoint.empty())
                return invalid("a replica of stage '" + stage + "' has no endpoint");
        }
        auto group = options.replica_groups.find(stage);
        if (group == options.replica_groups.end()) {
            return invalid("replicated stage '" + stage + "' has no replica group");
        }
        auto [size, inserted] = group_sizes.emplace(group->second, endpoints.size());
        if (!inserted && size->second != endpoints.size()) {
            return invalid("the stages of replica group '" + group->second +
                           "' have different replica counts");
        }
    }
    if (options.max_live_requests == 0) return invalid("max_live_requests is 0");
    if (options.stream_queue_capacity == 0) return invalid("stream_queue_capacity is 0");
    return {};
}

}  // namespace

CoordinatorCore::CoordinatorCore(CoordinatorOptions options)
    : options_(std::move(options)), paths_(options_) {
    for (const auto& [stage, endpoint] : options_.stage_endpoints) {
        auto replicas = options_.replica_endpoints.find(stage);
        if (replicas == options_.replica_endpoints.end()) {
            stages_.emplace(stage, StageRecord{.stage = stage});
            instance_endpoints_.emplace_back(stage, endpoint);
            continue;
        }
        ReplicaGroup& group = groups_[options_.replica_groups.at(stage)];
        group.stages.push_back(stage);
        group.replicas = static_cast<int>(replicas->second.size());
        for (int k = 0; k < group.replicas; ++k) {
            std::string name = config::replica_name(stage, k);
            stages_.emplace(name, StageRecord{.stage = stage, .replica = k});
            instance_endpoints_.emplace_back(name, replicas->second[static_cast<std::size_t>(k)]);
        }
    }
}

Result<std::unique_ptr<CoordinatorCore>> CoordinatorCore::create(CoordinatorOptions options) {
    OMNI_RETURN_IF_ERROR(validate(options));
    std::optional<TerminalStagesFn> terminal_fn;
    if (options.terminal_stages_fn) {
        auto fn = Registry::global().get<TerminalStagesFn>(FunctionKind::terminal_stages,
                                                           *options.terminal_stages_fn);
        if (!fn) return fail(fn.error().with_context("coordinator: terminal_stages_fn"));
        terminal_fn = std::move(*fn);
    }
    OMNI_TRY(auto plane, control::ControlPlane::create());
    std::unique_ptr<CoordinatorCore> core(new CoordinatorCore(std::move(options)));
    core->terminal_fn_ = std::move(terminal_fn);
    core->plane_ = std::move(plane);
    return core;
}

CoordinatorCore::~CoordinatorCore() { stop(); }

Status CoordinatorCore::start() {
    std::lock_guard lifecycle(lifecycle_mutex_);
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return fail(ErrorCode::failed_precondition, "coordinator: stopped");
        if (started_) return fail(ErrorCode::failed_precondition, "coordinator: already started");
    }
    auto handler = [this](proto::ControlMessage message) { on_message(std::move(message)); };
    auto pull = plane_->bind_pull(options_.coordinator_endpoint, handler);
    if (!pull) return fail(pull.error().with_context("coordinator"));
    auto publisher = plane_->bind_publisher(options_.abort_endpoint);
    if (!publisher) return fail(publisher.error().with_context("coordinator"));
    OMNI_RETURN_IF_ERROR(plane_->start());
    {
        std::lock_guard lock(mutex_);
        started_ = true;
    }
    timer_ = std::thread([this] { run_timer(); });
    spdlog::info("coordinator: listening on {}, aborts on {}, entry stage '{}'", *pull, *publisher,
                 options_.entry_stage);
    return {};
}

Status CoordinatorCore::wait_for_stages(std::size_t stage_count, Duration timeout) {
    {
        std::lock_guard lock(mutex_);
        if (!started_ || stopped_) {
            return fail(ErrorCode::failed_precondition, "coordinator: not running");
        }
    }
    auto waited = plane_->wait_for_subscribers(stage_count, timeout);
    if (!waited) return fail(waited.error().with_context("coordinator: waiting for stages"));
    return {};
}

Status CoordinatorCore::wait_for_heartbeats(Duration timeout) {
    std::unique_lock lock(mutex_);
    auto missing = [&] {
        std::vector<std::string> names;
        for (const auto& [stage, record] : stages_) {
            if (!record.last_seen) names.push_back(stage);
        }
        return names;
    };
    bool all_seen =
        heartbeat_seen_.wait_for(lock, timeout, [&] { return stopped_ || missing().empty(); });
    if (stopped_) return fail(ErrorCode::unavailable, "coordinator stopped");
    if (all_seen) return {};
    std::string names;
    for (const auto& name : missing()) names += (names.empty() ? "'" : ", '") + name + "'";
    return fail(ErrorCode::deadline_exceeded, "coordinator: no heartbeat yet from " + names);
}

Status CoordinatorCore::send_to_every_stage(const proto::ControlMessage& message) {
    {
        std::lock_guard lock(mutex_);
        if (!started_ || stopped_) return fail(ErrorCode::unavailable, "coordinator: not running");
    }
    Status first_error;
    for (const auto& [stage, endpoint] : instance_endpoints_) {
        auto sent = plane_->send(endpoint, message);
        if (!sent && first_error) {
            first_error = fail(sent.error().with_context("coordinator: stage '" + stage + "'"));
        }
    }
    return first_error;
}

void CoordinatorCore::on_message(proto::ControlMessage message) {
    if (auto* complete = std::get_if<proto::CompleteMessage>(&message)) {
        on_complete(std::move(*complete));
    } else if (auto* stream = std::get_if<proto::StreamMessage>(&message)) {
        on_stream(std::move(*stream));
    } else if (auto* heartbeat = std::get_if<proto::HeartbeatMessage>(&message)) {
        on_heartbeat(*heartbeat);
    } else {
        spdlog::warn("coordinator: ignored a '{}' message (not for the coordinator)",
                     proto::message_type_name(message));
        std::lock_guard lock(mutex_);
        ++ignored_;
    }
}

void CoordinatorCore::run_timer() {
    std::unique_lock lock(mutex_);
    while (!stopped_) {
        if (deadlines_.empty()) {
            timer_wake_.wait(lock);
            continue;
        }
        auto earliest = deadlines_.begin()->first;
        auto now = SteadyClock::now();
        if (now < earliest) {
            timer_wake_.wait_until(lock, earliest);
            continue;
        }
        std::vector<std::shared_ptr<RequestEntry>> expired;
        while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
            auto it = requests_.find(deadlines_.begin()->second->id);
            OMNI_CHECK(it != requests_.end(), "a deadline without a live request");
            auto entry = it->second;
            detach_locked(entry, RequestState::failed);
            expired.push_back(std::move(entry));
        }
        lock.unlock();
        for (const auto& entry : expired) {
            std::string message = "request '" + entry->id + "' exceeded its deadline";
            spdlog::info("coordinator: {}", message);
            publish_abort(entry->id, message);
            deliver_terminal(entry, terminal_event(*entry, RequestEvent::Kind::failed,
                                                   Error{ErrorCode::deadline_exceeded, message}));
        }
        lock.lock();
    }
}

void CoordinatorCore::stop() {
    std::lock_guard lifecycle(lifecycle_mutex_);
    std::vector<std::shared_ptr<RequestEntry>> live;
    bool was_started = false;
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return;
        stopped_ = true;
        was_started = started_;
        heartbeat_seen_.notify_all();
        live = detach_all_locked(RequestState::failed);
    }
    timer_wake_.notify_all();
    for (const auto& entry : live) {
        deliver_terminal(entry,
                         terminal_event(*entry, RequestEvent::Kind::failed,
                                        Error{ErrorCode::unavailable, "coordinator stopped"}));
    }
    if (was_started) {
        for (const auto& [stage, endpoint] : instance_endpoints_) {
            auto sent = plane_->send(endpoint, proto::ShutdownMessage{"coordinator stopped"});
            if (!sent)
                spdlog::warn("coordinator: shutdown to '{}': {}", stage, sent.error().message);
        }
    }
    plane_->stop(kStopLinger);
    if (timer_.joinable()) timer_.join();
    if (was_started) spdlog::info("coordinator: stopped ({} live requests failed)", live.size());
}

}  // namespace detail

Coordinator::Coordinator(std::unique_ptr<State> state) : state_(std::move(state)) {}

Coordinator::~Coordinator() { stop(); }

Result<std::unique_ptr<Coordinator>> Coordinator::create(CoordinatorOptions options) {
    OMNI_TRY(auto core, detail::CoordinatorCore::create(std::move(options)));
    auto state = std::make_unique<State>();
    state->core = std::move(core);
    return std::unique_ptr<Coordinator>(new Coordinator(std::move(state)));
}

Status Coordinator::start() { return state_->core->start(); }

Status Coordinator::wait_for_stages(std::size_t stage_count, Duration timeout) {
    return state_->core->wait_for_stages(stage_count, timeout);
}

Status Coordinator::wait_for_heartbeats(Duration timeout) {
    return state_->core->wait_for_heartbeats(timeout);
}

Status Coordinator::abort(const std::string& request_id, const std::string& reason) {
    return state_->core->abort(request_id, reason);
}

Status Coordinator::pause(const std::string& request_id, bool paused) {
    return state_->core->pause(request_id, paused);
}

void Coordinator::mark_stages_down(const std::vector<std::string>& stages,
                                   const std::string& reason, StageState state) {
    state_->core->mark_stages_down(stages, reason, state);
}

void Coordinator::mark_stages_restarted(const std::vector<std::string>& stages, std::int64_t pid) {
    state_->core->mark_stages_restarted(stages, pid);
}

Status Coordinator::start_profile(const std::string& trace_path_template) {
    return state_->core->send_to_every_stage(proto::ProfilerStartMessage{trace_path_template});
}

Status Coordinator::stop_profile() {
    return state_->core->send_to_every_stage(proto::ProfilerStopMessage{});
}

HealthReport Coordinator::health() const { return state_->core->health(); }

std::size_t Coordinator::live_requests() const { return state_->core->live_requests(); }

void Coordinator::stop() { state_->core->stop(); }

}  // namespace omnirt::pipeline

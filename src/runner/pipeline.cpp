#include "runner/pipeline.h"

#include <spdlog/spdlog.h>

#include "config/load.h"
#include "relay/shm/segment.h"
#include "runner/builtins.h"
#include "runner/pipeline_internal.h"
#include "runner/plan_codec.h"

namespace omnirt::runner {

namespace {

std::chrono::milliseconds remaining(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
}

// True for a rank of a tensor-parallel stage whose ranks run on several nodes.
bool spread_tp_rank(const config::RuntimePlan& plan, const config::ProcessPlan& process) {
    if (!process.tp) return false;
    const config::StagePlan* stage = plan.find_stage(process.tp->stage);
    return stage != nullptr && plan.nodes_of_stage(*stage).size() > 1;
}

// Why a process group cannot be restarted, or empty (`spread`: spread_tp_rank).
std::string not_restartable(const config::RuntimePlan& plan, const config::ProcessPlan& process,
                            bool spread) {
    if (spread) {
        return "a rank of tensor-parallel stage '" + process.tp->stage +
               "', whose ranks span nodes, is not restarted on its own (its ranks start afresh "
               "together only when a node that left comes back)";
    }
    if (plan.relay_backend == "gloo" || plan.relay_backend == "nccl") {
        return "relay_backend '" + plan.relay_backend +
               "' has a fixed world that a new process cannot join";
    }
    return {};
}

}  // namespace

std::string format_stages(const std::vector<std::string>& stages) {
    std::string out = "stages";
    for (const auto& stage : stages) out += " " + stage;
    return out;
}

Status Pipeline::State::start_children(Clock::time_point deadline) {
    const std::string plan_path = runtime_dir->path() + "/plan.msgpack";
    OMNI_RETURN_IF_ERROR(write_plan_file(*plan, plan_path));
    std::string binary = options.binary.empty() ? "/proc/self/exe" : options.binary;
    State* raw = this;
    OMNI_TRY(supervisor,
             Supervisor::create([raw](const std::string& name, const ExitStatus& status) {
                 raw->on_child_exit(name, status);
             }));
    for (const auto& process : plan->processes) {
        if (process.node != node_rank) continue;  // another node runs it
        // Supervision names a replica's stages as the coordinator knows them ("{stage}.r{k}").
        std::vector<std::string> stages;
        for (const auto& stage : process.stages) {
            stages.push_back(config::stage_instance(stage, process));
        }
        const bool spread = spread_tp_rank(*plan, process);
        auto slot = std::make_unique<ProcessSlot>(ProcessSlot{
            .name = process.name,
            .stages = std::move(stages),
            .spec = {.name = process.name,
                     .binary = binary,
                     .args = {"stage-process", "--plan", plan_path, "--process", process.name,
                              "--heartbeat-ms", std::to_string(options.heartbeat_interval.count()),
                              "--relay-timeout-ms", std::to_string(options.relay_timeout.count())}},
            .child = nullptr,
            .budget = RestartBudget(restart_policy),
            .not_restartable = not_restartable(*plan, process, spread),
            .reports_stages = !process.tp || process.tp->rank == 0});
        if (process.tp && !spread) {
            slot->tp_group = process.tp->stage;
            slot->tp_rank = process.tp->rank;
            constexpr std::string_view kFileScheme = "file://";
            if (process.tp->rendezvous.starts_with(kFileScheme)) {
                slot->tp_store = process.tp->rendezvous.substr(kFileScheme.size());
            }
        }
        OMNI_TRY(auto child, ChildProcess::spawn(slot->spec));
        {
            std::lock_guard lock(children_mutex);
            slot->child = std::move(child);
        }
        slots.push_back(std::move(slot));
    }
    for (auto& slot : slots) {
        Status ready = slot->child->wait_ready(remaining(deadline));
        if (!ready) return fail(ready.error());  // names the process already
        OMNI_RETURN_IF_ERROR(supervisor->watch(slot->child.get()));
    }
    restarter = std::thread([raw] { raw->run_restarter(); });
    return {};
}

void Pipeline::State::stop_all() {
    std::lock_guard lock(stop_mutex);
    if (stopped) return;
    stopped = true;
    if (options.before_stop) options.before_stop();
    // Exits from here on are expected: no restart starts, nothing is watched any more.
    park_restarter();
    if (supervisor) supervisor->stop();
    if (coordinator) coordinator->stop();  // shutdown message to every stage
    for (auto& host : hosts) host->stop();
    hosts.clear();
    // The shutdown message makes every child exit by itself; SIGTERM (then SIGKILL) only for
    // one that does not within the grace period.
    // Without a coordinator (a node other than the head) nobody sent the shutdown message.
    const auto grace_end =
        Clock::now() + (coordinator ? options.shutdown_grace : std::chrono::milliseconds(0));
    for (auto& slot : slots) {
        if (!slot->child) continue;
        std::optional<ExitStatus> exited = slot->child->wait_exit(remaining(grace_end));
        ExitStatus status = exited ? *exited : slot->child->terminate(options.shutdown_grace);
        if (!status.exited || status.code != 0) {
            spdlog::warn("process '{}' {} at shutdown", slot->name, status.to_string());
        }
    }
    {
        std::lock_guard children(children_mutex);
        for (auto& slot : slots) slot->child.reset();
    }
    release_restarter();
    // The stopped coordinator stays (its sockets are closed, its threads joined): calls after
    // stop() get `unavailable` instead of touching a destroyed object.
    if (runtime_dir) {
        // Segments of children that were killed (their own close() unlinks the rest).
        auto removed =
            relay::shm::remove_stale_segments(relay::shm::instance_tag(runtime_dir->path()));
        if (!removed) spdlog::warn("stale segments: {}", removed.error().message);
    }
    runtime_dir.reset();  // removes the sockets, the plan file and the directory
}

namespace {

pipeline::CoordinatorOptions coordinator_options(const config::RuntimePlan& plan,
                                                 const PipelineOptions& options) {
    pipeline::CoordinatorOptions out{.coordinator_endpoint = plan.coordinator_endpoint,
                                     .abort_endpoint = plan.abort_endpoint,
                                     .entry_stage = plan.entry_stage,
                                     .terminal_stages = plan.terminal_stages,
                                     .terminal_stages_fn = plan.terminal_stages_fn,
                                     .max_live_requests = options.max_live_requests};
    for (const auto& stage : plan.stages) {
        out.stage_endpoints[stage.name] = stage.endpoint;
        auto& targets = out.stage_targets[stage.name];
        targets = stage.next;
        targets.insert(targets.end(), stage.stream_to.begin(), stage.stream_to.end());
        if (stage.replicas > 1) {
            out.replica_endpoints[stage.name] = stage.replica_endpoints;
            out.replica_groups[stage.name] = stage.process;  // replica 0's process: one per group
        }
    }
    // A stage is reported dead after missing a few heartbeats.
    out.heartbeat_timeout =
        std::max(options.heartbeat_interval * 5, std::chrono::milliseconds(2000));
    return out;
}

}  // namespace

Result<std::unique_ptr<Pipeline>> Pipeline::start(const config::PipelineConfig& config,
                                                  PipelineOptions options) {
    OMNI_RETURN_IF_ERROR(register_builtins());
    auto state = std::make_unique<State>();
    state->options = options;
    state->restart_policy = config.restart;
    std::string base = options.runtime_base.empty() ? config::runtime_base_path(config.endpoints)
                                                    : options.runtime_base;
    OMNI_TRY(state->runtime_dir, config::RuntimeDirectory::create(base));
    OMNI_TRY(config::RuntimePlan plan,
             config::prepare_runtime(config, {.runtime_dir = state->runtime_dir->path(),
                                              .node_addresses = options.node_addresses}));
    if (options.placement == Placement::in_process && !options.node_addresses.empty()) {
        return fail(ErrorCode::unimplemented,
                    "a pipeline on several nodes needs placement 'processes'");
    }
    if (options.placement == Placement::in_process &&
        (plan.relay_backend == "gloo" || plan.relay_backend == "nccl")) {
        // Creating a c10d relay joins its process group, which blocks until every rank joins;
        // hosts created one after another in one process would wait for each other forever.
        return fail(ErrorCode::unimplemented,
                    "relay_backend '" + plan.relay_backend +
                        "' needs its stages in child processes (placement 'processes')");
    }
    state->plan = std::make_shared<const config::RuntimePlan>(std::move(plan));
    const auto deadline = Clock::now() + options.startup_timeout;

    OMNI_TRY(state->coordinator,
             pipeline::Coordinator::create(coordinator_options(*state->plan, options)));
    OMNI_RETURN_IF_ERROR(state->coordinator->start());
    pipeline::Coordinator* coordinator = state->coordinator.get();
    state->events = {
        .down =
            [coordinator](const std::vector<std::string>& stages, const std::string& reason,
                          pipeline::StageState stage_state) {
                coordinator->mark_stages_down(stages, reason, stage_state);
            },
        .restarted = [coordinator](
                         const std::vector<std::string>& stages,
                         std::int64_t pid) { coordinator->mark_stages_restarted(stages, pid); }};
    std::unique_ptr<Pipeline> pipeline(new Pipeline(std::move(state)));
    State& s = *pipeline->state_;
    if (s.options.on_coordinator_started) {
        OMNI_RETURN_IF_ERROR(s.options.on_coordinator_started(s.plan, *s.coordinator));
    }

    if (options.placement == Placement::in_process) {
        pipeline::StageHostOptions host_options{.relay_timeout = options.relay_timeout,
                                                .heartbeat_interval = options.heartbeat_interval};
        for (const auto& process : s.plan->processes) {
            OMNI_TRY(auto host, pipeline::StageHost::create(s.plan, process.name, host_options));
            OMNI_RETURN_IF_ERROR(host->start());
            s.hosts.push_back(std::move(host));
        }
    } else {
        OMNI_RETURN_IF_ERROR(s.start_children(deadline));
    }
    Status subscribed =
        s.coordinator->wait_for_stages(s.plan->stage_instances(), remaining(deadline));
    if (!subscribed) {
        return fail(subscribed.error().with_context("pipeline '" + s.plan->name +
                                                    "': stages did not connect in time"));
    }
    // Every stage announced itself: health() reports a started pipeline healthy from here on.
    Status announced = s.coordinator->wait_for_heartbeats(remaining(deadline));
    if (!announced) {
        return fail(announced.error().with_context("pipeline '" + s.plan->name +
                                                   "': stages did not report in time"));
    }
    return pipeline;
}

Result<std::unique_ptr<Pipeline>> Pipeline::start_node(config::RuntimePlan plan, int node_rank,
                                                       const config::RestartPolicy& restart,
                                                       StageEvents events,
                                                       PipelineOptions options) {
    OMNI_RETURN_IF_ERROR(register_builtins());
    if (options.placement != Placement::processes) {
        return fail(ErrorCode::unimplemented, "a node runs its stages in child processes");
    }
    auto state = std::make_unique<State>();
    state->options = options;
    state->restart_policy = restart;
    state->events = std::move(events);
    state->node_rank = node_rank;
    std::string base =
        options.runtime_base.empty() ? config::runtime_base_path({}) : options.runtime_base;
    OMNI_TRY(state->runtime_dir, config::RuntimeDirectory::create(base));
    plan.runtime_dir = state->runtime_dir->path();
    state->plan = std::make_shared<const config::RuntimePlan>(std::move(plan));
    std::unique_ptr<Pipeline> pipeline(new Pipeline(std::move(state)));
    OMNI_RETURN_IF_ERROR(pipeline->state_->start_children(Clock::now() + options.startup_timeout));
    return pipeline;
}

Pipeline::Pipeline(std::unique_ptr<State> state) : state_(std::move(state)) {}

Pipeline::~Pipeline() { stop(); }

pipeline::Coordinator& Pipeline::coordinator() { return *state_->coordinator; }

const config::RuntimePlan& Pipeline::plan() const { return *state_->plan; }

Result<StagePayload> Pipeline::submit(const std::string& request_id, OmniRequest request,
                                      pipeline::RequestOptions options) {
    return state_->coordinator->submit(request_id, std::move(request), options);
}

Result<std::unique_ptr<pipeline::RequestStream>> Pipeline::stream(
    const std::string& request_id, OmniRequest request, pipeline::RequestOptions options) {
    return state_->coordinator->stream(request_id, std::move(request), options);
}

Status Pipeline::abort(const std::string& request_id, const std::string& reason) {
    return state_->coordinator->abort(request_id, reason);
}

pipeline::HealthReport Pipeline::health() const { return state_->coordinator->health(); }

std::map<std::string, int> Pipeline::process_ids() const {
    std::map<std::string, int> out;
    std::lock_guard lock(state_->children_mutex);
    for (const auto& slot : state_->slots) {
        if (slot->child) out[slot->name] = slot->child->pid();
    }
    return out;
}

void Pipeline::control_processes(const std::vector<std::string>& processes, bool start,
                                 const std::string& reason) {
    {
        std::lock_guard lock(state_->restart_mutex);
        if (state_->restart_stopping) return;
        for (const auto& process : processes) {
            if (state_->find_slot(process) == nullptr) continue;  // another node's
            state_->controls.push_back({.process = process, .start = start, .reason = reason});
        }
    }
    state_->restart_wake.notify_all();
}

void Pipeline::stop() { state_->stop_all(); }

Result<std::unique_ptr<Pipeline>> start_pipeline_file(const std::string& path,
                                                      const std::vector<std::string>& overrides,
                                                      PipelineOptions options) {
    OMNI_RETURN_IF_ERROR(register_builtins());
    OMNI_TRY(config::PipelineConfig config,
             config::load_pipeline_file(path, {.overrides = overrides}));
    return Pipeline::start(config, std::move(options));
}

}  // namespace omnirt::runner

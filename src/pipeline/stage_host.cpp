#include "pipeline/stage_host.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "pipeline/local_dispatch.h"
#include "pipeline/stage_factory.h"
#include "pipeline/tp_group.h"
#include "pipeline/trace.h"

namespace omnirt::pipeline {

struct StageHost::State {
    std::shared_ptr<const config::RuntimePlan> plan;
    std::string process_name;
    // Declared before the stages: it must outlive them.
    LocalDispatcher dispatcher;
    std::vector<std::shared_ptr<Tracer>> tracers;
    std::vector<std::unique_ptr<Stage>> stages;
    std::vector<std::unique_ptr<TpFollower>> followers;  // TP ranks > 0 host no Stage

    std::mutex mutex;
    std::condition_variable changed;
    std::size_t shutdowns = 0;
    bool stop_requested = false;
    bool started = false;
    bool stopped = false;

    void on_stage_shutdown() {
        {
            std::lock_guard lock(mutex);
            ++shutdowns;
        }
        changed.notify_all();
    }
};

namespace {

Result<StageContext> make_context(const config::RuntimePlan& plan, const config::StagePlan& stage,
                                  const config::ProcessPlan& process, Tracer* tracer) {
    StageContext context{.stage_name = stage.name,
                         .args = stage.factory_args,
                         .next = stage.next,
                         .stream_to = stage.stream_to,
                         .stream_sources = stage.stream_sources,
                         .terminal = stage.terminal,
                         .tracer = tracer};
    if (process.tp) {
        context.tp_rank = process.tp->rank;
        context.tp_size = process.tp->size;
        context.tp_rendezvous = process.tp->rendezvous;
    }
    if (plan.node_addresses.size() > 1 && process.node >= 0 &&
        static_cast<std::size_t>(process.node) < plan.node_addresses.size()) {
        context.node_address = plan.node_addresses[static_cast<std::size_t>(process.node)];
    }
    if (!stage.gpu.empty()) {
        auto rank = static_cast<std::size_t>(context.tp_rank);
        context.device = Device::cuda(stage.gpu[rank < stage.gpu.size() ? rank : 0]);
    }
    return context;
}

// The control endpoints of a TP stage's ranks 1..size-1, in rank order.
std::vector<std::string> follower_endpoints(const config::RuntimePlan& plan,
                                            const std::string& stage) {
    std::vector<std::pair<int, std::string>> ranks;
    for (const auto& process : plan.processes) {
        if (process.tp && process.tp->stage == stage && process.tp->rank > 0) {
            ranks.emplace_back(process.tp->rank, process.tp->endpoint);
        }
    }
    std::sort(ranks.begin(), ranks.end());
    std::vector<std::string> out;
    for (auto& [rank, endpoint] : ranks) out.push_back(std::move(endpoint));
    return out;
}

}  // namespace

Result<std::unique_ptr<StageHost>> StageHost::create(
    std::shared_ptr<const config::RuntimePlan> plan, const std::string& process_name,
    StageHostOptions options) {
    if (!plan) return fail(ErrorCode::invalid_argument, "stage host: no plan");
    const config::ProcessPlan* process = plan->find_process(process_name);
    if (process == nullptr) {
        return fail(ErrorCode::not_found,
                    "stage host: the plan has no process '" + process_name + "'");
    }
    auto state = std::make_unique<State>();
    state->plan = plan;
    state->process_name = process_name;
    State* raw = state.get();
    for (const std::string& stage_name : process->stages) {
        const config::StagePlan* stage = plan->find_stage(stage_name);
        if (stage == nullptr) {
            return fail(ErrorCode::invalid_argument, "stage host: process '" + process_name +
                                                         "' names unknown stage '" + stage_name +
                                                         "'");
        }
        auto context_error = [&](const Error& error) {
            return error.with_context("stage '" + stage_name + "' (factory '" + stage->factory +
                                      "')");
        };
        auto factory = find_stage_factory(stage->factory);
        if (!factory) return fail(context_error(factory.error()));
        // A replica's trace is its own ("{stage}.r{k}" in the trace file name).
        auto tracer = std::make_shared<Tracer>(config::stage_instance(stage_name, *process));
        OMNI_TRY(StageContext context, make_context(*plan, *stage, *process, tracer.get()));
        auto scheduler = (*factory)(context);
        if (!scheduler) return fail(context_error(scheduler.error()));
        if (!*scheduler) {
            return fail(context_error(Error{ErrorCode::internal, "factory returned no scheduler"}));
        }
        if (process->tp && process->tp->rank > 0) {
            auto follower =
                TpFollower::create(stage_name, process->tp->rank, process->tp->endpoint,
                                   std::move(*scheduler), [raw] { raw->on_stage_shutdown(); });
            if (!follower) return fail(context_error(follower.error()));
            state->tracers.push_back(std::move(tracer));
            state->followers.push_back(std::move(*follower));
            continue;
        }
        if (process->tp) {
            auto leader = TpLeaderScheduler::create(stage_name, std::move(*scheduler),
                                                    follower_endpoints(*plan, stage_name));
            if (!leader) return fail(context_error(leader.error()));
            *scheduler = std::move(*leader);
        }
        StageOptions stage_options{.plan = plan,
                                   .stage_name = stage_name,
                                   .replica = process->replica,
                                   .local = &state->dispatcher,
                                   .relay_timeout = options.relay_timeout,
                                   .heartbeat_interval = options.heartbeat_interval,
                                   .on_shutdown = [raw] { raw->on_stage_shutdown(); }};
        auto created = Stage::create(std::move(stage_options), std::move(*scheduler), tracer);
        if (!created) return fail(context_error(created.error()));
        state->tracers.push_back(std::move(tracer));
        state->stages.push_back(std::move(*created));
    }
    return std::unique_ptr<StageHost>(new StageHost(std::move(state)));
}

StageHost::StageHost(std::unique_ptr<State> state) : state_(std::move(state)) {}

StageHost::~StageHost() { stop(); }

Status StageHost::start() {
    // Followers first: rank 0 may send them work as soon as its stage is up.
    for (auto& follower : state_->followers) {
        Status started = follower->start();
        if (!started) {
            return fail(started.error().with_context("process '" + state_->process_name + "'"));
        }
    }
    for (std::size_t i = 0; i < state_->stages.size(); ++i) {
        Status started = state_->stages[i]->start();
        if (!started) {
            for (std::size_t j = 0; j < i; ++j) state_->stages[j]->stop();
            return fail(started.error().with_context("process '" + state_->process_name + "'"));
        }
    }
    std::lock_guard lock(state_->mutex);
    state_->started = true;
    return {};
}

void StageHost::wait_for_shutdown() {
    std::unique_lock lock(state_->mutex);
    state_->changed.wait(lock, [&] {
        return state_->stop_requested ||
               state_->shutdowns >= state_->stages.size() + state_->followers.size();
    });
}

void StageHost::request_stop() {
    {
        std::lock_guard lock(state_->mutex);
        state_->stop_requested = true;
    }
    state_->changed.notify_all();
}

void StageHost::stop() {
    {
        std::lock_guard lock(state_->mutex);
        if (state_->stopped) return;
        state_->stopped = true;
    }
    // Reverse order: downstream stages of a fused chain go last-in, first-out.
    for (auto it = state_->stages.rbegin(); it != state_->stages.rend(); ++it) (*it)->stop();
    for (auto& follower : state_->followers) follower->stop();
    request_stop();
}

std::vector<Stage*> StageHost::stages() const {
    std::vector<Stage*> out;
    for (const auto& stage : state_->stages) out.push_back(stage.get());
    return out;
}

}  // namespace omnirt::pipeline

// Supervision of the child processes of a running Pipeline: an exit while the pipeline runs
// fails the requests that may pass through the dead group's stages at once (the coordinator
// does that), then the group is started again after a back-off, within the restart budget
// (config::RestartPolicy). Past the budget, or for a group that cannot be restarted, its stages
// fail for good and health says why.
//
// A replacement runs the same `omnirt stage-process` command as the first incarnation. It binds
// the same control endpoint (peers' sockets reconnect by themselves), makes a fresh relay (a new
// pid: no shared memory in common with the dead one, whose segments are unlinked here), and is
// serving again once the coordinator has its first heartbeat; the coordinator ignores
// heartbeats of every other pid, so a late one from the dead incarnation revives nothing.
//
// The ranks of a tensor-parallel stage on this node are one group for this: a c10d group cannot
// take in one new rank, so when any rank exits all of them are stopped and started again in rank
// order (on a fresh rendezvous store), counted once in rank 0's budget. Ranks spread over nodes
// restart together only through the node hub (a node that left and came back).
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "relay/shm/segment.h"
#include "runner/pipeline_internal.h"

namespace omnirt::runner {

ProcessSlot* Pipeline::State::find_slot(const std::string& process) {
    for (auto& slot : slots) {
        if (slot->name == process) return slot.get();
    }
    return nullptr;
}

std::vector<ProcessSlot*> Pipeline::State::group_of(const ProcessSlot& slot) {
    if (slot.tp_group.empty()) return {const_cast<ProcessSlot*>(&slot)};
    std::vector<ProcessSlot*> ranks;
    for (auto& other : slots) {
        if (other->tp_group == slot.tp_group) ranks.push_back(other.get());
    }
    std::sort(ranks.begin(), ranks.end(),
              [](const ProcessSlot* a, const ProcessSlot* b) { return a->tp_rank < b->tp_rank; });
    return ranks;
}

void Pipeline::State::on_child_exit(const std::string& process, const ExitStatus& status) {
    ProcessSlot* slot = find_slot(process);
    if (slot == nullptr) return;
    spdlog::error("process '{}' ({}) {}", process, format_stages(slot->stages), status.to_string());
    // A killed process cannot unlink its shared memory: do it for it.
    {
        std::lock_guard lock(children_mutex);
        if (slot->child) relay::shm::remove_segments_of_dead_process(slot->child->pid());
    }
    handle_loss(*slot, "process '" + process + "' " + status.to_string());
}

void Pipeline::State::handle_loss(ProcessSlot& slot, const std::string& what) {
    auto state = pipeline::StageState::failed;
    std::string reason;
    Clock::time_point restart_at;
    // A TP rank's whole group restarts, counted in rank 0's budget.
    const std::vector<ProcessSlot*> group = group_of(slot);
    ProcessSlot& leader = *group.front();
    {
        std::lock_guard lock(restart_mutex);
        if (restart_stopping || slot.held) return;  // shutting down, or held: expected
        const config::RestartPolicy& policy = leader.budget.policy();
        if (!slot.not_restartable.empty()) {
            reason = what + "; not restarted: " + slot.not_restartable;
        } else if (policy.max_restarts == 0) {
            reason = what + "; not restarted (restart.max_restarts is 0)";
        } else {
            auto now = Clock::now();
            RestartBudget::Decision decision = leader.budget.on_exit(now);
            if (decision.restart) {
                state = pipeline::StageState::restarting;
                reason = what + (group.size() > 1 ? "; the tensor-parallel group's " : "; ") +
                         "restart " + std::to_string(decision.attempt) + " of " +
                         std::to_string(policy.max_restarts) + " within " +
                         fmt::format("{:g}", policy.window_s) + " s, in " +
                         std::to_string(decision.delay.count()) + " ms";
                restart_at = now + decision.delay;
                // The other ranks are stopped with it: their exits from here on are expected.
                for (ProcessSlot* rank : group) rank->held = rank != &slot;
            } else {
                reason = "restarted " + std::to_string(policy.max_restarts) + " times within " +
                         fmt::format("{:g}", policy.window_s) + " s; last: " + what;
            }
        }
    }
    if (state == pipeline::StageState::failed) {
        spdlog::error("process '{}' ({}) failed for good: {}", slot.name,
                      format_stages(slot.stages), reason);
        if (group.size() > 1) {
            // The other ranks cannot serve without it: the restart thread stops them (and
            // keeps them down), which frees what they hold.
            {
                std::lock_guard lock(restart_mutex);
                for (ProcessSlot* rank : group) {
                    if (rank == &slot || restart_stopping) continue;
                    controls.push_back({.process = rank->name,
                                        .start = false,
                                        .reason = "its tensor-parallel stage failed for good"});
                }
            }
            restart_wake.notify_all();
        }
    }
    if (events.down) events.down(slot.stages, reason, state);
    if (state != pipeline::StageState::restarting) return;
    {
        // Only now: the replacement's mark_stages_restarted must follow mark_stages_down.
        std::lock_guard lock(restart_mutex);
        if (restart_stopping) return;
        due[leader.name] = restart_at;
    }
    restart_wake.notify_all();
}

void Pipeline::State::run_restarter() {
    pthread_setname_np(pthread_self(), "omnirt-restart");
    std::unique_lock lock(restart_mutex);
    while (!restart_stopping) {
        if (!controls.empty()) {
            ProcessControlRequest request = std::move(controls.front());
            controls.pop_front();
            ProcessSlot* slot = find_slot(request.process);
            if (slot == nullptr) continue;
            lock.unlock();
            apply_control(*slot, request);
            lock.lock();
            continue;
        }
        if (due.empty()) {
            restart_wake.wait(lock);
            continue;
        }
        auto next = due.begin();
        for (auto it = due.begin(); it != due.end(); ++it) {
            if (it->second < next->second) next = it;
        }
        // The back-off itself: a timed wait that stop() or an earlier entry cuts short.
        if (Clock::now() < next->second) {
            restart_wake.wait_until(lock, next->second);
            continue;
        }
        ProcessSlot* slot = find_slot(next->first);
        due.erase(next);
        if (slot == nullptr) continue;
        lock.unlock();
        if (slot->tp_group.empty()) {
            restart(*slot);
        } else {
            restart_group(*slot);
        }
        lock.lock();
    }
    // Parked: children this thread started must not get their death signal before stop_all
    // has shut them down.
    restarter_parked = true;
    restart_wake.notify_all();
    restart_wake.wait(lock, [&] { return restarter_released; });
}

bool Pipeline::State::restart(ProcessSlot& slot) {
    spdlog::info("restarting process '{}' ({})", slot.name, format_stages(slot.stages));
    auto spawned = ChildProcess::spawn(slot.spec);
    if (!spawned) {
        handle_loss(slot, "process '" + slot.name +
                              "' could not be started again: " + spawned.error().message);
        return false;
    }
    std::unique_ptr<ChildProcess> child = std::move(*spawned);
    {
        std::lock_guard lock(restart_mutex);
        if (restart_stopping) {
            child->kill_now();
            return false;  // the destructor reaps it
        }
        starting = child.get();
    }
    Status ready = child->wait_ready(options.startup_timeout);
    {
        std::lock_guard lock(restart_mutex);
        starting = nullptr;
        if (restart_stopping) {
            child->kill_now();
            return false;
        }
    }
    if (!ready) {
        int pid = child->pid();
        child->terminate(options.shutdown_grace);
        relay::shm::remove_segments_of_dead_process(pid);
        handle_loss(slot, ready.error().message);
        return false;
    }
    const auto pid = child->pid();
    ChildProcess* dead = nullptr;
    {
        std::lock_guard lock(children_mutex);
        dead = slot.child.get();
    }
    // Its exit was handled already; this waits until the supervisor thread has let go of it.
    if (dead != nullptr) supervisor->unwatch(dead);
    {
        std::lock_guard lock(children_mutex);
        slot.child = std::move(child);  // destroys the dead incarnation's (reaped) object
    }
    if (events.restarted && slot.reports_stages) events.restarted(slot.stages, pid);
    Status watched = supervisor->watch(slot.child.get());
    if (!watched) {
        // Only when the supervisor stopped (shutdown began): stop_all shuts the child down.
        spdlog::debug("process '{}' not watched: {}", slot.name, watched.error().message);
        return false;
    }
    spdlog::info("process '{}' ({}) restarted as pid {}", slot.name, format_stages(slot.stages),
                 pid);
    return true;
}

void Pipeline::State::restart_group(ProcessSlot& leader) {
    const std::vector<ProcessSlot*> group = group_of(leader);
    spdlog::info("restarting the {} ranks of tensor-parallel stage '{}'", group.size(),
                 leader.tp_group);
    // A group cannot take in one new rank: every rank starts afresh, on a fresh store.
    for (ProcessSlot* rank : group) stop_incarnation(*rank);
    if (!leader.tp_store.empty()) {
        std::error_code ignored;
        std::filesystem::remove(leader.tp_store, ignored);
    }
    {
        std::lock_guard lock(restart_mutex);
        if (restart_stopping) return;
        for (ProcessSlot* rank : group) rank->held = false;
    }
    for (ProcessSlot* rank : group) {
        {
            // A rank that failed meanwhile has scheduled the next attempt and held the others.
            std::lock_guard lock(restart_mutex);
            if (restart_stopping || rank->held) return;
        }
        if (!restart(*rank)) return;
    }
}

void Pipeline::State::stop_incarnation(ProcessSlot& slot) {
    ChildProcess* current = nullptr;
    {
        std::lock_guard lock(children_mutex);
        current = slot.child.get();
    }
    if (current == nullptr) return;
    // Unwatched first: the supervisor reports nothing of this exit (for one that exited
    // already, this waits until the supervisor has let go of it).
    supervisor->unwatch(current);
    const int pid = current->pid();
    current->kill_now();
    if (!current->wait_exit(options.shutdown_grace)) {
        spdlog::error("process '{}' (pid {}) did not exit after SIGKILL", slot.name, pid);
    }
    relay::shm::remove_segments_of_dead_process(pid);
    std::lock_guard lock(children_mutex);
    slot.child.reset();
}

void Pipeline::State::apply_control(ProcessSlot& slot, const ProcessControlRequest& request) {
    {
        std::lock_guard lock(restart_mutex);
        if (restart_stopping) return;
        slot.held = true;  // from here on its exit is expected
        due.erase(slot.name);
    }
    stop_incarnation(slot);
    spdlog::info("process '{}' ({}) {}: {}", slot.name, format_stages(slot.stages),
                 request.start ? "starts afresh" : "stopped and held down", request.reason);
    if (!request.start) return;
    {
        std::lock_guard lock(restart_mutex);
        if (restart_stopping) return;
        slot.held = false;
    }
    restart(slot);
}

void Pipeline::State::park_restarter() {
    std::unique_lock lock(restart_mutex);
    restart_stopping = true;
    if (starting != nullptr) starting->kill_now();  // cuts its wait_ready short
    restart_wake.notify_all();
    if (!restarter.joinable()) return;
    restart_wake.wait(lock, [&] { return restarter_parked; });
}

void Pipeline::State::release_restarter() {
    {
        std::lock_guard lock(restart_mutex);
        restarter_released = true;
    }
    restart_wake.notify_all();
    if (restarter.joinable()) restarter.join();
}

}  // namespace omnirt::runner

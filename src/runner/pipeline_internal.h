#pragma once
// Internal to pipeline*.cpp: the state behind runner::Pipeline. pipeline.cpp starts and stops
// it; pipeline_restart.cpp supervises the child processes and restarts them.
//
// Threads and locks:
//   - the owner thread runs start / stop_all;
//   - the Supervisor thread calls on_child_exit;
//   - the restart thread (`restarter`) starts replacement processes. It lives until stop_all
//     has shut every child down: a child gets PR_SET_PDEATHSIG, which fires when the thread
//     that spawned it exits.
//   restart_mutex guards the restart fields (due, controls, stopping, parked, released,
//   starting) and every ProcessSlot's budget and held flag; children_mutex guards every
//   ProcessSlot's child pointer (read by process_ids from any thread). Neither is held while
//   calling the coordinator.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/runtime_dir.h"
#include "config/runtime_plan.h"
#include "pipeline/coordinator.h"
#include "pipeline/stage_host.h"
#include "runner/child_process.h"
#include "runner/pipeline.h"
#include "runner/restart_budget.h"

namespace omnirt::runner {

using Clock = std::chrono::steady_clock;

// One process group of Placement::processes and its current incarnation.
struct ProcessSlot {
    std::string name;
    std::vector<std::string> stages;
    ChildSpec spec;
    std::unique_ptr<ChildProcess> child;  // null while no incarnation runs
    RestartBudget budget;
    // Why this group can never be restarted (empty: it can).
    std::string not_restartable;
    // False for a TP follower rank: the coordinator hears of its stage through rank 0 only.
    bool reports_stages = true;
    // A rank of a tensor-parallel stage whose ranks all run on this node: the stage's name. The
    // ranks restart together (a new group needs every rank afresh), under the budget of rank 0's
    // slot, which the restart thread's `due` names.
    std::string tp_group;
    int tp_rank = 0;
    // The group's file store (a file:// rendezvous), removed before the ranks start again: a
    // killed group leaves its keys behind. Empty for a TCP rendezvous (rank 0 hosts it).
    std::string tp_store;
    // Stopped and kept down by control_processes (restart_mutex): its exits are expected.
    bool held = false;
};

// A control_processes request for one process group.
struct ProcessControlRequest {
    std::string process;
    bool start = false;
    std::string reason;
};

struct Pipeline::State {
    PipelineOptions options;
    config::RestartPolicy restart_policy;
    // Destroyed last: the runtime directory holds the sockets and the plan file.
    std::unique_ptr<config::RuntimeDirectory> runtime_dir;
    std::shared_ptr<const config::RuntimePlan> plan;
    std::unique_ptr<pipeline::Coordinator> coordinator;  // null on nodes other than the head
    StageEvents events;                                  // supervision's reports
    int node_rank = 0;                                   // only its process groups start here
    std::vector<std::unique_ptr<ProcessSlot>> slots;     // fixed after start_children
    std::vector<std::unique_ptr<pipeline::StageHost>> hosts;
    std::unique_ptr<Supervisor> supervisor;
    std::mutex stop_mutex;
    bool stopped = false;

    mutable std::mutex children_mutex;

    std::mutex restart_mutex;
    std::condition_variable restart_wake;
    std::map<std::string, Clock::time_point> due;  // process -> when to start it again
    bool restart_stopping = false;
    bool restarter_parked = false;
    bool restarter_released = false;
    ChildProcess* starting = nullptr;  // a replacement waiting to be ready (killed by stop)
    std::deque<ProcessControlRequest> controls;  // control_processes, in call order
    std::thread restarter;

    // pipeline.cpp
    Status start_children(Clock::time_point deadline);
    void stop_all();

    // pipeline_restart.cpp
    void on_child_exit(const std::string& process, const ExitStatus& status);
    void run_restarter();
    // The group lost its incarnation (`what` says how): schedules a restart or fails its stages.
    void handle_loss(ProcessSlot& slot, const std::string& what);
    // Starts a new incarnation of the slot; false when it did not start (handle_loss has been
    // told).
    bool restart(ProcessSlot& slot);
    // Restart thread: every rank of `leader`'s TP group stopped, then started again in rank
    // order.
    void restart_group(ProcessSlot& leader);
    // Stops the slot's incarnation, if any, without reporting the exit (alive: SIGKILL).
    void stop_incarnation(ProcessSlot& slot);
    // The slots of `slot`'s TP group in rank order (only `slot` when it has no group).
    [[nodiscard]] std::vector<ProcessSlot*> group_of(const ProcessSlot& slot);
    // Restart thread: stops the slot's incarnation, then starts a new one when asked to.
    void apply_control(ProcessSlot& slot, const ProcessControlRequest& request);
    // Stops the restart thread from starting anything and waits until it is parked.
    void park_restarter();
    void release_restarter();
    [[nodiscard]] ProcessSlot* find_slot(const std::string& process);
};

// "stages a, b" for log lines.
[[nodiscard]] std::string format_stages(const std::vector<std::string>& stages);

}  // namespace omnirt::runner

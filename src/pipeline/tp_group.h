#pragma once
// Tensor-parallel stage groups (config.md, "Tensor Parallelism"). A TP stage runs one process
// per rank. Rank 0 owns the stage's external IO (its Stage shell is the only one the coordinator
// and the other stages see); its scheduler is wrapped in a TpLeaderScheduler that sends every
// inbox message and abort to the follower ranks, in the order rank 0's scheduler receives them,
// so every rank's scheduler sees the same work and makes the same decisions (lockstep; the
// model's collectives run over the group's own rendezvous, StageContext::tp_rendezvous). Only
// rank 0's results leave the group: a TpFollower runs a follower's scheduler and discards its
// outbox.
//
// Leader -> follower messages (to TpRank::endpoint, over the control plane): new_request as
// SubmitMessage (payload inline), stream_chunk as StreamMessage (chunk_index = chunk_id),
// stream_done as a control-only DataReadyMessage (is_done), abort as AbortMessage, and a
// ShutdownMessage when the leader stops.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/scheduler.h"

namespace omnirt::pipeline {

class TpLeaderScheduler final : public Scheduler {
  public:
    // `follower_endpoints`: ranks 1..size-1 in rank order.
    [[nodiscard]] static Result<std::unique_ptr<TpLeaderScheduler>> create(
        std::string stage_name, std::unique_ptr<Scheduler> inner,
        std::vector<std::string> follower_endpoints);
    ~TpLeaderScheduler() override;

    [[nodiscard]] Status start() override;
    void stop() override;
    void abort(const std::string& request_id) override;
    // Pauses are not forwarded (Scheduler::pause's default: ignored): the ranks would have to
    // agree on them before every step.
    [[nodiscard]] std::size_t active_requests() const override;
    // Rank 0's scheduler's.
    [[nodiscard]] SchedulerLoad load() const override;

  private:
    struct State;
    explicit TpLeaderScheduler(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

class TpFollower {
  public:
    // `on_shutdown` runs (on the IO thread) when rank 0 sends shutdown.
    [[nodiscard]] static Result<std::unique_ptr<TpFollower>> create(
        std::string stage_name, int rank, std::string endpoint,
        std::unique_ptr<Scheduler> scheduler, std::function<void()> on_shutdown);
    TpFollower(const TpFollower&) = delete;
    TpFollower& operator=(const TpFollower&) = delete;
    ~TpFollower();  // stop()

    // Binds the endpoint and starts the scheduler.
    [[nodiscard]] Status start();
    void stop();
    // Messages received from rank 0 (work and aborts).
    [[nodiscard]] std::size_t received() const;

  private:
    struct State;
    explicit TpFollower(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::pipeline

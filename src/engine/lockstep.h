#pragma once
// Lockstep: what the ArScheduler of one tensor-parallel rank needs from its group so that every
// rank makes the same scheduling decisions (config.md, "Tensor Parallelism"). The model's own
// collectives (all-reduce, all-gather inside the forward) run over the same group, on the same
// engine thread, so every collective is issued in the same order on every rank.
//
// Why the scheduler needs more than the model's collectives: every rank receives the same
// messages in the same order (rank 0 forwards its inbox, pipeline/tp_group.h), but each rank
// drains its inbox at moments that depend on timing. Left alone, two ranks would put different
// requests into a step and their collectives would no longer match. So before every step the
// ranks agree (agree()):
//   * messages: how many inbox messages every rank has received so far; each rank then handles
//     exactly the smallest count (the messages are the same on every rank, so the same ones);
//   * aborts: rank 0's list (aborts reach ranks at different moments, and rank 0 is the one that
//     emits, so its order is the order);
//   * stop: whether any rank is stopping;
//   * a digest of each rank's scheduler state, so that ranks that diverged anyway (a bug, a
//     failure on one rank only) fail loudly instead of running mismatched collectives.
// Seeds of requests without a seed come from rank 0's seed state (connect()).
//
// Threads: connect() and agree() on the engine thread only (they are collectives); cancel()
// from any thread.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::engine {

struct LockstepProposal {
    std::uint64_t received_messages = 0;  // inbox messages this rank has received in total
    bool stopping = false;                // this rank's stop() was called
    std::vector<std::string> aborts;      // rank 0 only: request ids aborted since the last step
    std::uint64_t state_digest = 0;       // the same on every rank while they are in lockstep
};

struct LockstepDecision {
    std::uint64_t messages = 0;       // handle messages up to this count (the minimum)
    bool stop = false;                // some rank is stopping
    std::vector<std::string> aborts;  // rank 0's aborts, to apply before the messages
    bool diverged = false;            // the state digests differ
    int stopping_rank = -1;           // the lowest stopping rank when stop
};

class Lockstep {
  public:
    virtual ~Lockstep() = default;
    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    // Joins the group (blocks until every rank has joined, or the group's timeout) and returns
    // rank 0's `seed_state`. Called once, before anything else. Errors name the rendezvous.
    [[nodiscard]] virtual Result<std::uint64_t> connect(std::uint64_t seed_state) = 0;
    // One agreement; every rank calls it at the same point of its loop. Errors (a rank that is
    // gone, a timeout, cancel()) leave the group unusable.
    [[nodiscard]] virtual Result<LockstepDecision> agree(const LockstepProposal& proposal) = 0;
    // Makes a collective in progress, and every later one, fail with `aborted` at once. For a
    // stop whose peers do not take part any more.
    virtual void cancel() = 0;
};

}  // namespace omnirt::engine

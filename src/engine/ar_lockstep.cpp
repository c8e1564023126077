// The engine loop of a tensor-parallel rank (ArEngineConfig::lockstep, engine/lockstep.h).
//
// Every rank receives the same inbox messages in the same order (rank 0 forwards its inbox to
// the others before it queues a message itself, pipeline/tp_group.h). A rank moves messages from
// its inbox into `received_` as they come, and before every step the ranks agree on a count:
// the smallest number received by any rank. Each rank then handles exactly the messages up to
// that count, after rank 0's aborts, so every rank holds the same sequences and schedules the
// same batch; the model's collectives inside the forward match.
//
// Idle: a rank with no sequence and nothing received blocks on its inbox (no agreement, no
// spinning), once the ranks agreed after its last step (so that a step that failed on some
// ranks only is seen, by the state digest, before the ranks go idle). Its peers are idle at the
// same point of the message stream; the first rank that receives the next message agrees and waits
// inside the collective until the others receive it too (they will: rank 0 forwards every message
// it queues).
//
// Waiting for input: when every sequence is held back by ArEngineConfig::ready (its input
// streams have not come), a step changes nothing; the ranks then wait for their inbox, but
// agree every kInputPoll even without a message (the ready decisions are the same on every rank,
// so all of them wait there, and rank 0's aborts need an agreement to reach the others). Ranks
// that hold stream chunks of requests not seen yet wait the same way (an abort drops them).
//
// Stop: stop() closes the inbox but leaves the queued messages. A stopping rank with nothing
// received, no sequence and no early stream chunks leaves at once: its peers are idle at the same
// point and will not agree again (rank 0 forwards every message before it queues it, so a peer
// cannot hold a message rank 0 lacks once rank 0's inbox is closed). Otherwise its peers will come
// to the next agreement, which tells everyone to stop; when rank 0 is the one stopping, the others
// leave too (the stage is stopping; their unfinished requests are dropped, as rank 0's are). A rank
// told that another rank stopped fails its requests instead (broken below). stop() waits
// lockstep_stop_grace for the loop to end and then cancels the group's collectives (a peer that no
// longer takes part).
//
// Broken: when connecting, agreeing or a stop of a peer fails the group, the rank fails its
// sequences and every later request with that error, without any collective.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "engine/ar_scheduler.h"
#include "engine/block_allocator.h"

namespace omnirt::engine {
namespace {

// How often ranks whose sequences all wait for input streams agree anyway.
constexpr std::chrono::milliseconds kInputPoll{50};

}  // namespace

void ArScheduler::lockstep_loop() {
    Lockstep& group = *config_.lockstep;
    const std::string who = "stage '" + config_.stage_name + "' (TP rank " +
                            std::to_string(group.rank()) + " of " + std::to_string(group.size()) +
                            ")";
    if (Result<std::uint64_t> seed = group.connect(seed_state_)) {
        seed_state_ = *seed;  // unseeded requests draw the same seeds on every rank
    } else {
        break_lockstep(seed.error().with_context(who + ": joining the TP group"));
    }
    // After a step the ranks agree once more even when they have nothing left: a step that
    // failed on some ranks only leaves their states different, and the digest must see it.
    bool stepped = false;  // the last step changed something (see ArScheduler::step)
    for (;;) {
        ++counters_.loop_turns;
        if (lockstep_error_) return broken_loop();
        if (!stepped && sequences_.empty() && received_.empty() && early_streams_.empty()) {
            publish_stats(/*idle=*/true);
            std::optional<pipeline::IncomingMessage> message = inbox_.pop();
            if (!message) return;  // stopped while idle: the peers are idle too (see above)
            received_.push_back(std::move(*message));
        } else if (!stepped && received_.empty()) {
            // Every sequence waits for its input streams, or stream chunks wait for requests
            // that have not come. Wait for a message, but agree with the peers every kInputPoll
            // anyway: rank 0's aborts must get through, and the peers may be waiting here too.
            publish_stats(/*idle=*/true);
            if (std::optional<pipeline::IncomingMessage> message =
                    inbox_.pop_until(pipeline::Clock::now() + kInputPoll)) {
                received_.push_back(std::move(*message));
            }
        }
        while (std::optional<pipeline::IncomingMessage> message = inbox_.try_pop()) {
            received_.push_back(std::move(*message));
        }
        const bool stopping = stopping_.load();
        // (With early stream chunks the peers poll; they learn of the stop by agreeing.)
        if (stopping && !stepped && sequences_.empty() && received_.empty() &&
            early_streams_.empty()) {
            return;
        }

        LockstepProposal proposal{.received_messages = handled_messages_ + received_.size(),
                                  .stopping = stopping,
                                  .state_digest = state_digest()};
        if (group.rank() == 0) {
            std::lock_guard lock(mutex_);
            proposal.aborts.swap(pending_aborts_);
        }
        Result<LockstepDecision> decision = group.agree(proposal);
        if (!decision) {
            break_lockstep(decision.error().with_context(who));
            continue;
        }
        if (decision->diverged) {
            break_lockstep(Error{ErrorCode::internal,
                                 who + ": the TP ranks' scheduler states diverged (a step failed "
                                       "on some ranks only); the group cannot go on"});
            continue;
        }
        if (decision->stop) {
            // Rank 0 stopping is the stage stopping: everyone leaves. Another rank stopping
            // leaves this one unable to compute.
            if (stopping || decision->stopping_rank == 0) return;
            break_lockstep(Error{ErrorCode::unavailable,
                                 who + ": TP rank " + std::to_string(decision->stopping_rank) +
                                     " stopped; the group cannot compute any more"});
            continue;
        }
        apply_agreed_aborts(decision->aborts);
        OMNI_CHECK(decision->messages >= handled_messages_ &&
                       decision->messages - handled_messages_ <= received_.size(),
                   "lockstep: the agreed message count is outside what this rank received");
        while (handled_messages_ < decision->messages) {
            pipeline::IncomingMessage message = std::move(received_.front());
            received_.pop_front();
            ++handled_messages_;
            handle_message(std::move(message));
        }
        sweep();
        stepped = !sequences_.empty() && guarded_step();
        publish_stats(/*idle=*/false);
    }
}

void ArScheduler::apply_agreed_aborts(const std::vector<std::string>& ids) {
    if (ids.empty()) return;
    {
        std::lock_guard lock(mutex_);
        for (const std::string& id : ids) aborted_ids_.insert(id);
    }
    retire_aborted(ids);
    sweep();
}

void ArScheduler::break_lockstep(Error error) {
    log::error(error.message + "; its requests fail from now on");
    for (auto& entry : sequences_) {
        ArSequence& sequence = *entry.second;
        if (sequence.status_ == SequenceStatus::waiting ||
            sequence.status_ == SequenceStatus::running) {
            fail_sequence(sequence, error);
        }
    }
    sweep();
    for (const pipeline::IncomingMessage& message : received_) fail_message(message, error);
    received_.clear();
    lockstep_error_ = std::move(error);
}

void ArScheduler::broken_loop() {
    for (;;) {
        publish_stats(/*idle=*/true);
        std::optional<pipeline::IncomingMessage> message = inbox_.pop();
        std::vector<std::string> aborts;
        {
            std::lock_guard lock(mutex_);
            aborts.swap(pending_aborts_);
        }
        apply_agreed_aborts(aborts);  // no peers to agree with any more
        if (!message || stopping_.load()) return;
        fail_message(*message, *lockstep_error_);
    }
}

void ArScheduler::fail_message(const pipeline::IncomingMessage& message, const Error& error) {
    if (message.kind != pipeline::IncomingKind::new_request || is_aborted(message.request_id)) {
        return;
    }
    ++counters_.failed_requests;
    outbox_.push(pipeline::OutgoingMessage{
        .request_id = message.request_id, .kind = pipeline::OutgoingKind::error, .error = error});
}

std::uint64_t ArScheduler::state_digest() const {
    std::uint64_t tokens = 0;
    std::uint64_t computed = 0;
    for (const auto& entry : sequences_) {
        tokens += entry.second->tokens_.size();
        computed += static_cast<std::uint64_t>(entry.second->computed_);
    }
    std::uint64_t digest = 0xcbf29ce484222325ULL;  // FNV-1a over the words
    for (std::uint64_t word :
         {counters_.steps, static_cast<std::uint64_t>(sequences_.size()),
          static_cast<std::uint64_t>(waiting_.size()), static_cast<std::uint64_t>(running_.size()),
          tokens, computed, static_cast<std::uint64_t>(allocator_->free_blocks()),
          handled_messages_}) {
        digest = (digest ^ word) * 0x100000001b3ULL;
    }
    return digest;
}

void ArScheduler::stop_lockstep() {
    // Queued messages stay: they tell the loop whether its peers will come to one more agreement.
    inbox_.close();
    if (!engine_.joinable()) return;
    std::unique_lock lock(exit_mutex_);
    if (exit_cv_.wait_for(lock, config_.lockstep_stop_grace, [&] { return engine_exited_; })) {
        return;
    }
    lock.unlock();
    log::warn("stage '" + config_.stage_name + "' (TP rank " +
              std::to_string(config_.lockstep->rank()) +
              "): the engine did not stop together with its peers within " +
              std::to_string(config_.lockstep_stop_grace.count()) +
              " ms; cancelling the group's collectives");
    config_.lockstep->cancel();
}

}  // namespace omnirt::engine

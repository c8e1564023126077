#include "relay/shm/transfer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace omnirt::relay::shm {
namespace {

using Clock = std::chrono::steady_clock;

bool reader_died(pid_t reader) {
    return reader != 0 && reader != current_pid() && !process_alive(reader);
}

}  // namespace

Clock::time_point deadline_after(Duration timeout) {
    auto now = Clock::now();
    if (timeout <= Duration::zero()) return now;
    if (timeout >= std::chrono::duration_cast<Duration>(Clock::time_point::max() - now)) {
        return Clock::time_point::max();
    }
    return now + timeout;
}

std::shared_ptr<DedicatedSegment> Transfer::dedicated() const {
    std::lock_guard lock(mutex_);
    return dedicated_;
}

void Transfer::drop_dedicated() {
    std::shared_ptr<DedicatedSegment> dropped;
    std::lock_guard lock(mutex_);
    dropped = std::move(dedicated_);  // unmapped after the lock is released
}

bool Transfer::finished() const {
    if (pool_) return pool_->finished(ticket_);
    auto segment = dedicated();
    if (!segment) return true;
    const std::uint32_t word = segment->state_word();
    const DedicatedState state = DedicatedWord::state(word);
    return DedicatedWord::generation(word) != generation_ || state == DedicatedState::done ||
           state == DedicatedState::aborted;
}

bool Transfer::release_if_finished() {
    if (!finished()) return false;
    if (!pool_) drop_dedicated();
    return true;
}

void Transfer::abort() {
    if (aborted_.exchange(true)) return;
    if (pool_) {
        pool_->abandon(ticket_);
    } else if (auto segment = dedicated()) {
        segment->abort(generation_);
        segment.reset();
        drop_dedicated();
    }
}

Status Transfer::wait(Duration timeout, Duration liveness_interval, bool until_claimed) {
    const auto deadline = deadline_after(timeout);
    auto reader_gone = [] {
        return fail(ErrorCode::unavailable,
                    "the receiver process died while reading the shm transfer");
    };
    while (true) {
        if (aborted_.load()) {
            return fail(ErrorCode::aborted,
                        "shm transfer was cleaned up (cleanup(request_id) or close())");
        }
        if (reader_died_.load()) return reader_gone();
        std::uint32_t observed = 0;
        std::shared_ptr<DedicatedSegment> segment;
        if (pool_) {
            observed = pool_->word(ticket_.slot);
            if (pool_->finished(ticket_)) return {};
            if (until_claimed && SlotWord::state(observed) == SlotState::claimed &&
                SlotWord::generation(observed) == ticket_.generation) {
                return {};
            }
            if (SlotWord::state(observed) == SlotState::claimed &&
                reader_died(pool_->reader_pid(ticket_.slot))) {
                pool_->reclaim_from_dead_readers();
                reader_died_ = true;
                return reader_gone();
            }
        } else {
            segment = dedicated();
            if (!segment) return {};  // seen finished before
            observed = segment->state_word();
            const DedicatedState state = DedicatedWord::state(observed);
            if (DedicatedWord::generation(observed) != generation_ ||
                state == DedicatedState::done) {
                segment.reset();
                drop_dedicated();
                return {};
            }
            if (until_claimed && state == DedicatedState::claimed) return {};
            if (state == DedicatedState::claimed && reader_died(segment->reader_pid())) {
                segment.reset();
                reader_died_ = true;
                drop_dedicated();
                return reader_gone();
            }
        }
        auto now = Clock::now();
        if (now >= deadline) {
            return fail(ErrorCode::deadline_exceeded,
                        "the receiver did not finish reading the shm transfer in time");
        }
        auto slice = std::min<std::chrono::nanoseconds>(deadline - now, liveness_interval);
        if (pool_) {
            pool_->wait_for_word_change(ticket_.slot, observed, slice);
        } else {
            segment->wait_for_change(observed, slice);
        }
    }
}

}  // namespace omnirt::relay::shm

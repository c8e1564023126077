#include "relay/shm/transfer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace omnirt::relay::shm {
namespace {

using Clock = std::chrono::steady_clock;

bool reader_died(pid_t reader) {
    return reader != 0 && reader != ::getpid() && !process_alive(reader);
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

bool Transfer::finished() const {
    if (pool_) return pool_->finished(ticket_);
    auto state = DedicatedSegment::state_of(dedicated_->state_word());
    return state == DedicatedState::done || state == DedicatedState::aborted;
}

void Transfer::abort() {
    if (aborted_.exchange(true)) return;
    if (pool_) {
        pool_->abandon(ticket_);
    } else {
        dedicated_->abort();
        dedicated_->segment().unlink();
    }
}

Status Transfer::wait(Duration timeout, Duration liveness_interval) {
    const auto deadline = deadline_after(timeout);
    while (true) {
        if (aborted_.load()) {
            return fail(ErrorCode::aborted,
                        "shm transfer was cleaned up (cleanup(request_id) or close())");
        }
        std::uint32_t observed = 0;
        if (pool_) {
            observed = pool_->word(ticket_.slot);
            if (pool_->finished(ticket_)) return {};
            if (SlotWord::state(observed) == SlotState::claimed &&
                reader_died(pool_->reader_pid(ticket_.slot))) {
                pool_->reclaim_from_dead_readers();
                return fail(ErrorCode::unavailable,
                            "the receiver process died while reading the shm transfer");
            }
        } else {
            observed = dedicated_->state_word();
            auto state = DedicatedSegment::state_of(observed);
            if (state == DedicatedState::done) {
                dedicated_->segment().unlink();
                return {};
            }
            if (state == DedicatedState::claimed && reader_died(dedicated_->reader_pid())) {
                dedicated_->segment().unlink();
                return fail(ErrorCode::unavailable,
                            "the receiver process died while reading the shm transfer");
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
            dedicated_->wait_for_change(observed, slice);
        }
    }
}

}  // namespace omnirt::relay::shm

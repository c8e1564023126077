#include "relay/gloo/abort_timer.h"

namespace omnirt::relay {

AbortTimer::AbortTimer() : thread_([this] { run(); }) {}

AbortTimer::~AbortTimer() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
}

AbortTimer::Ticket AbortTimer::arm(Clock::time_point deadline, std::function<void()> on_expiry) {
    Ticket ticket;
    bool earliest = false;
    {
        std::lock_guard lock(mutex_);
        ticket = {deadline, next_id_++};
        auto [it, inserted] = armed_.emplace(ticket, std::move(on_expiry));
        earliest = it == armed_.begin();
    }
    if (earliest) wake_.notify_one();
    return ticket;
}

void AbortTimer::disarm(const Ticket& ticket) {
    // Callbacks run under mutex_, so once the lock is held none is running.
    std::lock_guard lock(mutex_);
    armed_.erase(ticket);
}

void AbortTimer::run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        if (armed_.empty()) {
            wake_.wait(lock);
            continue;
        }
        auto first = armed_.begin();
        if (Clock::now() < first->first.first) {
            // A copy: wait_until reads the deadline again after waking, and meanwhile disarm()
            // may have erased the node that holds it.
            const Clock::time_point deadline = first->first.first;
            wake_.wait_until(lock, deadline);
            continue;
        }
        auto callback = std::move(first->second);
        armed_.erase(first);
        callback();
    }
}

}  // namespace omnirt::relay

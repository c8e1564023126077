#include "runner/restart_budget.h"

#include <algorithm>

namespace omnirt::runner {

void RestartBudget::forget_before(Clock::time_point now) {
    auto window = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(policy_.window_s));
    while (!restarts_.empty() && now - restarts_.front() >= window) restarts_.pop_front();
}

std::int64_t RestartBudget::restarts_in_window(Clock::time_point now) {
    forget_before(now);
    return static_cast<std::int64_t>(restarts_.size());
}

RestartBudget::Decision RestartBudget::on_exit(Clock::time_point now) {
    std::int64_t earlier = restarts_in_window(now);
    if (earlier >= policy_.max_restarts) return Decision{};
    // initial * 2^earlier, capped; the shift is bounded so it cannot overflow.
    std::int64_t delay = policy_.backoff_initial_ms;
    for (std::int64_t i = 0; i < earlier && delay < policy_.backoff_max_ms; ++i) delay *= 2;
    delay = std::min(delay, policy_.backoff_max_ms);
    restarts_.push_back(now);
    return Decision{
        .restart = true, .delay = std::chrono::milliseconds(delay), .attempt = earlier + 1};
}

}  // namespace omnirt::runner

#pragma once
// RestartBudget: the restart decisions for one process group under a config::RestartPolicy.
// Each exit of the group either schedules a restart after a back-off delay or, once the group
// has been restarted max_restarts times within the last window_s seconds, gives up. The delay
// doubles with every restart still inside the window (backoff_initial_ms, 2x, 4x, ...) up to
// backoff_max_ms, so a crash loop slows down before the budget stops it.
//
// Thread safety: none; the runner calls it under its own lock.
#include <chrono>
#include <cstdint>
#include <deque>

#include "config/schema.h"

namespace omnirt::runner {

class RestartBudget {
  public:
    using Clock = std::chrono::steady_clock;

    struct Decision {
        bool restart = false;
        std::chrono::milliseconds delay{0};  // when restart: wait this long first
        std::int64_t attempt = 0;            // when restart: 1-based, within the window
    };

    explicit RestartBudget(config::RestartPolicy policy) : policy_(policy) {}

    // The group exited at `now`: restart it (counting one restart at `now`) or give up.
    [[nodiscard]] Decision on_exit(Clock::time_point now);
    // Restarts counted within the window ending at `now`.
    [[nodiscard]] std::int64_t restarts_in_window(Clock::time_point now);
    [[nodiscard]] const config::RestartPolicy& policy() const { return policy_; }

  private:
    void forget_before(Clock::time_point now);

    config::RestartPolicy policy_;
    std::deque<Clock::time_point> restarts_;  // oldest first
};

}  // namespace omnirt::runner

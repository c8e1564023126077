// RestartBudget: back-off doubling up to its cap, the budget within the window, and the window
// sliding so that old restarts stop counting.
#include "runner/restart_budget.h"

#include <gtest/gtest.h>

namespace omnirt::runner {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RestartBudget, BacksOffExponentiallyUpToTheCapThenGivesUp) {
    RestartBudget budget(config::RestartPolicy{
        .max_restarts = 5, .window_s = 60, .backoff_initial_ms = 100, .backoff_max_ms = 500});
    auto now = RestartBudget::Clock::time_point{} + seconds(1000);
    std::vector<std::int64_t> delays;
    for (int i = 0; i < 5; ++i) {
        auto decision = budget.on_exit(now);
        ASSERT_TRUE(decision.restart);
        EXPECT_EQ(decision.attempt, i + 1);
        delays.push_back(decision.delay.count());
        now += milliseconds(10);
    }
    EXPECT_EQ(delays, (std::vector<std::int64_t>{100, 200, 400, 500, 500}));
    auto exhausted = budget.on_exit(now);
    EXPECT_FALSE(exhausted.restart);
    EXPECT_EQ(budget.restarts_in_window(now), 5);
}

TEST(RestartBudget, RestartsOlderThanTheWindowNoLongerCount) {
    RestartBudget budget(config::RestartPolicy{
        .max_restarts = 2, .window_s = 10, .backoff_initial_ms = 50, .backoff_max_ms = 10000});
    auto start = RestartBudget::Clock::time_point{} + seconds(1000);
    ASSERT_TRUE(budget.on_exit(start).restart);
    ASSERT_TRUE(budget.on_exit(start + seconds(5)).restart);
    EXPECT_FALSE(budget.on_exit(start + seconds(9)).restart);
    // The first restart left the window: one more is allowed, with the back-off of the second.
    auto later = budget.on_exit(start + seconds(10));
    ASSERT_TRUE(later.restart);
    EXPECT_EQ(later.attempt, 2);
    EXPECT_EQ(later.delay, milliseconds(100));
    // Long quiet: the back-off starts over.
    auto fresh = budget.on_exit(start + seconds(100));
    ASSERT_TRUE(fresh.restart);
    EXPECT_EQ(fresh.attempt, 1);
    EXPECT_EQ(fresh.delay, milliseconds(50));
}

TEST(RestartBudget, ZeroRestartsNeverRestarts) {
    RestartBudget budget(config::RestartPolicy{.max_restarts = 0});
    EXPECT_FALSE(budget.on_exit(RestartBudget::Clock::now()).restart);
}

}  // namespace
}  // namespace omnirt::runner

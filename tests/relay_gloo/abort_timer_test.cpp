#include "relay/gloo/abort_timer.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <vector>

namespace omnirt::relay {
namespace {

using namespace std::chrono_literals;
using Clock = AbortTimer::Clock;

TEST(AbortTimer, RunsACallbackOnceAtItsDeadline) {
    AbortTimer timer;
    std::promise<void> ran;
    int runs = 0;
    auto ticket = timer.arm(Clock::now(), [&] {
        ++runs;
        ran.set_value();
    });
    ASSERT_EQ(ran.get_future().wait_for(60s), std::future_status::ready);
    timer.disarm(ticket);  // after expiry: harmless
    EXPECT_EQ(runs, 1);
}

TEST(AbortTimer, RunsCallbacksInDeadlineOrder) {
    AbortTimer timer;
    std::mutex mutex;
    std::vector<int> order;
    std::promise<void> last;
    const auto start = Clock::now();
    auto record = [&](int id) {
        std::lock_guard lock(mutex);
        order.push_back(id);
    };
    (void)timer.arm(start + 600ms, [&] {
        record(3);
        last.set_value();
    });
    (void)timer.arm(start + 200ms, [&] { record(1); });
    (void)timer.arm(start + 400ms, [&] { record(2); });
    ASSERT_EQ(last.get_future().wait_for(60s), std::future_status::ready);
    std::lock_guard lock(mutex);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
    EXPECT_GE(Clock::now() - start, 600ms);
}

TEST(AbortTimer, DisarmedAndOutlivedCallbacksNeverRun) {
    bool ran = false;
    {
        AbortTimer timer;
        auto ticket = timer.arm(Clock::now() + 1h, [&] { ran = true; });
        timer.disarm(ticket);
        (void)timer.arm(Clock::now() + 1h, [&] { ran = true; });
    }  // destroyed with one callback still armed
    EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace omnirt::relay

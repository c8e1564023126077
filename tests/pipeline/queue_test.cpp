#include "pipeline/queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace omnirt::pipeline {
namespace {

using namespace std::chrono_literals;
constexpr auto kHangGuard = 30s;

TEST(BlockingQueueTest, PopsInPushOrder) {
    BlockingQueue<int> queue(8);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(queue.push(i));
    EXPECT_EQ(queue.size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(queue.pop(), i);
    EXPECT_EQ(queue.size(), 0u);
    EXPECT_EQ(queue.try_pop(), std::nullopt);
}

TEST(BlockingQueueTest, ZeroCapacityMeansOne) {
    BlockingQueue<int> queue(0);
    EXPECT_EQ(queue.capacity(), 1u);
    ASSERT_TRUE(queue.push(1));
    EXPECT_EQ(queue.size(), 1u);
}

TEST(BlockingQueueTest, PushBlocksWhileFullUntilAPop) {
    BlockingQueue<int> queue(1);
    ASSERT_TRUE(queue.push(1));
    std::promise<void> about_to_push;
    auto pushed = std::async(std::launch::async, [&] {
        about_to_push.set_value();
        return queue.push(2);
    });
    about_to_push.get_future().wait();
    // The producer is (or soon will be) blocked: the queue stays at capacity.
    EXPECT_EQ(queue.size(), 1u);
    EXPECT_EQ(queue.pop(), 1);
    ASSERT_EQ(pushed.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_TRUE(pushed.get());
    EXPECT_EQ(queue.pop(), 2);
}

TEST(BlockingQueueTest, CloseWakesABlockedPop) {
    BlockingQueue<int> queue(4);
    auto popped = std::async(std::launch::async, [&] { return queue.pop(); });
    queue.close();
    ASSERT_EQ(popped.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(popped.get(), std::nullopt);
    EXPECT_TRUE(queue.closed());
}

TEST(BlockingQueueTest, CloseWakesABlockedPushWhichFails) {
    BlockingQueue<int> queue(1);
    ASSERT_TRUE(queue.push(1));
    auto pushed = std::async(std::launch::async, [&] { return queue.push(2); });
    queue.close();
    ASSERT_EQ(pushed.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_FALSE(pushed.get());
    // What was queued before close still drains.
    EXPECT_EQ(queue.pop(), 1);
    EXPECT_EQ(queue.pop(), std::nullopt);
}

TEST(BlockingQueueTest, PushAfterCloseFailsAndPopDrainsThenEnds) {
    BlockingQueue<int> queue(4);
    ASSERT_TRUE(queue.push(1));
    ASSERT_TRUE(queue.push(2));
    queue.close();
    EXPECT_FALSE(queue.push(3));
    EXPECT_EQ(queue.pop(), 1);
    EXPECT_EQ(queue.pop_until(BlockingQueue<int>::Clock::now() + kHangGuard), 2);
    EXPECT_EQ(queue.pop(), std::nullopt);
    EXPECT_EQ(queue.try_pop(), std::nullopt);
}

TEST(BlockingQueueTest, PopUntilTimesOutWithoutClosing) {
    BlockingQueue<int> queue(4);
    const auto deadline = BlockingQueue<int>::Clock::now() + 1ms;
    EXPECT_EQ(queue.pop_until(deadline), std::nullopt);
    EXPECT_GE(BlockingQueue<int>::Clock::now(), deadline);
    EXPECT_FALSE(queue.closed());
    // A deadline in the past still returns what is queued.
    ASSERT_TRUE(queue.push(7));
    EXPECT_EQ(queue.pop_until(BlockingQueue<int>::Clock::now() - 1s), 7);
}

TEST(BlockingQueueTest, WaitNotEmptyTakesNothingAndEndsOnceClosedAndEmpty) {
    BlockingQueue<int> queue(4);
    auto waited = std::async(std::launch::async, [&] { return queue.wait_not_empty(); });
    ASSERT_TRUE(queue.push(5));
    ASSERT_EQ(waited.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_TRUE(waited.get());
    EXPECT_EQ(queue.size(), 1u);  // still there for try_pop
    EXPECT_TRUE(queue.wait_not_empty_until(BlockingQueue<int>::Clock::now() - 1s));
    EXPECT_EQ(queue.try_pop(), 5);
    EXPECT_FALSE(queue.wait_not_empty_until(BlockingQueue<int>::Clock::now() + 1ms));
    EXPECT_FALSE(queue.closed());
    // Closed with an item: true until it is taken, then false without blocking.
    ASSERT_TRUE(queue.push(6));
    queue.close();
    EXPECT_TRUE(queue.wait_not_empty());
    EXPECT_EQ(queue.try_pop(), 6);
    EXPECT_FALSE(queue.wait_not_empty());
}

TEST(BlockingQueueTest, CloseWakesAWaitNotEmpty) {
    BlockingQueue<int> queue(4);
    auto waited = std::async(std::launch::async, [&] { return queue.wait_not_empty(); });
    queue.close();
    ASSERT_EQ(waited.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_FALSE(waited.get());
}

TEST(BlockingQueueTest, InterruptEndsABlockedPopInterruptibleOnceAndIsNeverLost) {
    BlockingQueue<int> queue(4);
    // Before any waiter: the next wait ends at once, and only that one.
    queue.interrupt();
    EXPECT_EQ(queue.pop_interruptible(), std::nullopt);
    EXPECT_FALSE(queue.closed());
    ASSERT_TRUE(queue.push(7));
    EXPECT_EQ(queue.pop_interruptible(), 7);
    // A blocked waiter.
    std::promise<void> waiting;
    auto popped = std::async(std::launch::async, [&] {
        waiting.set_value();
        return queue.pop_interruptible();
    });
    waiting.get_future().wait();
    queue.interrupt();
    ASSERT_EQ(popped.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(popped.get(), std::nullopt);
    // Items queued before the interrupt come first.
    ASSERT_TRUE(queue.push(8));
    queue.interrupt();
    EXPECT_EQ(queue.pop_interruptible(), 8);
    EXPECT_EQ(queue.pop_interruptible(), std::nullopt);
    // Plain pop() ignores interrupts.
    queue.interrupt();
    ASSERT_TRUE(queue.push(9));
    EXPECT_EQ(queue.pop(), 9);
    // One interrupt ends one wait: the next one blocks until an item comes. (A wait that
    // ended at once would show here; the 50 ms can only hide a bug on a loaded machine, never
    // fail a correct queue.)
    EXPECT_EQ(queue.pop_interruptible(), std::nullopt);  // the interrupt left above
    auto blocked = std::async(std::launch::async, [&] { return queue.pop_interruptible(); });
    EXPECT_EQ(blocked.wait_for(50ms), std::future_status::timeout);
    ASSERT_TRUE(queue.push(10));
    ASSERT_EQ(blocked.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_EQ(blocked.get(), 10);
}

TEST(BlockingQueueTest, RemoveIfCountsAndFreesSpaceForBlockedPushers) {
    BlockingQueue<int> queue(4);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(queue.push(i));
    auto pushed = std::async(std::launch::async, [&] { return queue.push(10); });
    EXPECT_EQ(queue.remove_if([](int v) { return v % 2 == 0; }), 2u);
    ASSERT_EQ(pushed.wait_for(kHangGuard), std::future_status::ready);
    EXPECT_TRUE(pushed.get());
    EXPECT_EQ(queue.remove_if([](int) { return false; }), 0u);
    EXPECT_EQ(queue.pop(), 1);
    EXPECT_EQ(queue.pop(), 3);
    EXPECT_EQ(queue.pop(), 10);
}

TEST(BlockingQueueTest, ManyProducersAndConsumersLoseNothing) {
    constexpr int kProducers = 4;
    constexpr int kPerProducer = 2000;
    BlockingQueue<int> queue(16);  // small: producers block often
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
        producers.emplace_back([&, p] {
            for (int i = 0; i < kPerProducer; ++i) ASSERT_TRUE(queue.push(p * kPerProducer + i));
        });
    }
    std::vector<std::future<std::vector<int>>> consumers;
    for (int c = 0; c < 3; ++c) {
        consumers.push_back(std::async(std::launch::async, [&] {
            std::vector<int> seen;
            while (auto item = queue.pop()) seen.push_back(*item);
            return seen;
        }));
    }
    for (auto& producer : producers) producer.join();
    queue.close();
    std::vector<int> all;
    for (auto& consumer : consumers) {
        ASSERT_EQ(consumer.wait_for(kHangGuard), std::future_status::ready);
        std::vector<int> seen = consumer.get();
        // Each consumer sees every producer's items in that producer's order.
        std::vector<int> last(kProducers, -1);
        for (int v : seen) {
            EXPECT_GT(v, last[v / kPerProducer]);
            last[v / kPerProducer] = v;
        }
        all.insert(all.end(), seen.begin(), seen.end());
    }
    ASSERT_EQ(all.size(), static_cast<std::size_t>(kProducers * kPerProducer));
    std::sort(all.begin(), all.end());
    for (int i = 0; i < kProducers * kPerProducer; ++i) ASSERT_EQ(all[i], i);
}

}  // namespace
}  // namespace omnirt::pipeline

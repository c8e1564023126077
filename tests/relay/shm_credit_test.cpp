// Credits and lifetimes of the shm relay: a sender out of credits blocks until a receiver
// releases one (a copy, a dropped view, a dropped send buffer, a cleanup); waits time out and
// abort; close wakes everybody.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <set>
#include <thread>

#include "relay/shm/pool.h"
#include "shm_test_support.h"

namespace omnirt::relay::testing {
namespace {

constexpr std::size_t kSlot = 4096;

class ShmCreditTest : public ShmRelayTest {
  protected:
    ShmTuning tuning() const { return {.credit_wait = kHangGuard}; }
    std::unique_ptr<ShmRelay> sender(std::int64_t credits) {
        return make(options("sender", kSlot, credits), tuning());
    }
    std::unique_ptr<ShmRelay> receiver(bool zero_copy = false) {
        return make(options("receiver", kSlot, 1, zero_copy), tuning());
    }
};

TEST_F(ShmCreditTest, PoolHandsOutExactlyItsCredits) {
    auto name = shm::format_segment_name(
        {.instance = instance_, .pid = ::getpid(), .relay = "pool", .serial = 1u << 30});
    auto pool = shm::Pool::create(name, kSlot, 3, 77);
    ASSERT_TRUE(pool.has_value()) << pool.error().to_string();
    std::set<std::uint32_t> slots;
    std::vector<shm::SlotTicket> tickets;
    for (int i = 0; i < 3; ++i) {
        auto ticket = (*pool)->try_acquire();
        ASSERT_TRUE(ticket.has_value());
        EXPECT_EQ(ticket->generation, 1u);
        slots.insert(ticket->slot);
        tickets.push_back(*ticket);
    }
    EXPECT_EQ(slots.size(), 3u);
    EXPECT_FALSE((*pool)->try_acquire().has_value());
    EXPECT_TRUE((*pool)->cancel_write(tickets[1]));
    EXPECT_FALSE((*pool)->cancel_write(tickets[1]));  // once only
    auto again = (*pool)->try_acquire();
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->slot, tickets[1].slot);
    EXPECT_EQ(again->generation, 2u);
}

TEST_F(ShmCreditTest, PutBlocksUntilAGetReleasesACredit) {
    auto out = sender(2);
    auto in = receiver();
    auto first = out->put_async(pattern(100, 1), "request");
    auto second = out->put_async(pattern(100, 2), "request");
    ASSERT_TRUE(first && second);

    std::atomic<bool> released{false};
    bool released_before_put_returned = false;
    Result<std::unique_ptr<PutOperation>> third = fail(ErrorCode::internal, "not run");
    std::thread blocked([&] {
        third = out->put_async(pattern(100, 3), "request");
        released_before_put_returned = released.load();
    });
    ASSERT_TRUE(eventually([&] { return out->blocked_senders() == 1; }));
    released = true;
    auto get = in->get_async((*first)->metadata(), Tensor(), "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    blocked.join();
    ASSERT_TRUE(third.has_value()) << third.error().to_string();
    EXPECT_TRUE(released_before_put_returned);
    EXPECT_TRUE((*first)->wait_for_completion(kHangGuard).has_value());

    auto third_get = in->get_async((*third)->metadata(), Tensor(), "request");
    ASSERT_TRUE(third_get.has_value());
    EXPECT_TRUE(same_bytes((*third_get)->tensor(), pattern(100, 3)));
}

TEST_F(ShmCreditTest, DroppingAZeroCopyViewReturnsTheCredit) {
    auto out = sender(1);
    auto in = receiver(/*zero_copy=*/true);
    auto first = out->put_async(pattern(100, 1), "request");
    ASSERT_TRUE(first.has_value());
    auto get = in->get_async((*first)->metadata(), Tensor(), "request");
    ASSERT_TRUE(get.has_value());
    Tensor view = (*get)->tensor();
    get->reset();

    std::atomic<bool> dropped{false};
    bool dropped_before_put_returned = false;
    std::thread blocked([&] {
        auto second = out->put_async(pattern(100, 2), "request");
        EXPECT_TRUE(second.has_value());
        dropped_before_put_returned = dropped.load();
    });
    ASSERT_TRUE(eventually([&] { return out->blocked_senders() == 1; }));
    EXPECT_TRUE(same_bytes(view, pattern(100, 1)));
    dropped = true;
    view = Tensor();
    blocked.join();
    EXPECT_TRUE(dropped_before_put_returned);
    EXPECT_TRUE((*first)->wait_for_completion(kHangGuard).has_value());
}

TEST_F(ShmCreditTest, AnUnsentSendBufferHoldsACreditUntilDropped) {
    auto out = sender(1);
    auto buffer = out->allocate_send_buffer(10);
    ASSERT_TRUE(buffer.has_value());
    std::atomic<bool> dropped{false};
    bool dropped_before_put_returned = false;
    std::thread blocked([&] {
        EXPECT_TRUE(out->put_async(pattern(10, 1), "request").has_value());
        dropped_before_put_returned = dropped.load();
    });
    ASSERT_TRUE(eventually([&] { return out->blocked_senders() == 1; }));
    dropped = true;
    *buffer = Tensor();
    blocked.join();
    EXPECT_TRUE(dropped_before_put_returned);
}

TEST_F(ShmCreditTest, WaitTimesOutWhenNobodyReadsAndCleanupReleases) {
    auto out = sender(1);
    auto in = receiver();
    auto put = out->put_async(pattern(100, 1), "request");
    ASSERT_TRUE(put.has_value());
    auto timed_out = (*put)->wait_for_completion(std::chrono::milliseconds(20));
    ASSERT_FALSE(timed_out.has_value());
    EXPECT_EQ(timed_out.error().code, ErrorCode::deadline_exceeded);

    out->cleanup("request");
    auto aborted = (*put)->wait_for_completion(kHangGuard);
    ASSERT_FALSE(aborted.has_value());
    EXPECT_EQ(aborted.error().code, ErrorCode::aborted);
    // The credit came back: the next put does not block, and the old metadata is dead.
    auto next = out->put_async(pattern(100, 2), "other");
    ASSERT_TRUE(next.has_value());
    auto stale = in->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_FALSE(stale.has_value());
    EXPECT_EQ(stale.error().code, ErrorCode::not_found) << stale.error().message;
}

TEST_F(ShmCreditTest, DedicatedTransferTimesOutAndCleanupUnlinksItWithoutACache) {
    // With no cache every payload has a segment of its own, which cleanup unlinks. (With the
    // cache, cleanup returns it for reuse: shm_dedicated_reuse_test.cpp.)
    ShmTuning no_cache = tuning();
    no_cache.dedicated_cache_bytes = 0;
    auto out = make(options("sender", kSlot, 1), no_cache);
    auto in = receiver();
    auto put = out->put_async(pattern(kSlot * 4, 1), "request");
    ASSERT_TRUE(put.has_value());
    EXPECT_EQ(segments().size(), 3u);
    auto timed_out = (*put)->wait_for_completion(std::chrono::milliseconds(10));
    ASSERT_FALSE(timed_out.has_value());
    EXPECT_EQ(timed_out.error().code, ErrorCode::deadline_exceeded);
    out->cleanup("request");
    EXPECT_EQ(segments().size(), 2u);
    EXPECT_EQ((*put)->wait_for_completion(kHangGuard).error().code, ErrorCode::aborted);
    auto gone = in->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_FALSE(gone.has_value());
    EXPECT_EQ(gone.error().code, ErrorCode::unavailable) << gone.error().message;
}

TEST_F(ShmCreditTest, AnUnboundedWaitReturnsWhenTheReceiverReads) {
    auto out = sender(1);
    auto in = receiver();
    auto put = out->put_async(pattern(100, 1), "request");
    ASSERT_TRUE(put.has_value());
    Status result = fail(ErrorCode::internal, "not run");
    std::thread waiter([&] { result = (*put)->wait_for_completion(Duration::max()); });
    ASSERT_TRUE(in->get_async((*put)->metadata(), Tensor(), "request").has_value());
    waiter.join();
    EXPECT_TRUE(result.has_value()) << result.error().to_string();
}

TEST_F(ShmCreditTest, CleanupAbortsAWaitInProgress) {
    auto out = sender(1);
    auto put = out->put_async(pattern(100, 1), "request");
    ASSERT_TRUE(put.has_value());
    Status result;
    std::thread waiter([&] { result = (*put)->wait_for_completion(kHangGuard); });
    out->cleanup("request");
    waiter.join();
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, ErrorCode::aborted);
}

TEST_F(ShmCreditTest, CleanupAbortsAPutWaitingForACredit) {
    auto out = sender(1);
    auto first = out->put_async(pattern(100, 1), "a");
    ASSERT_TRUE(first.has_value());
    Result<std::unique_ptr<PutOperation>> second = fail(ErrorCode::internal, "not run");
    std::thread blocked([&] { second = out->put_async(pattern(100, 2), "b"); });
    ASSERT_TRUE(eventually([&] { return out->blocked_senders() == 1; }));
    out->cleanup("b");
    blocked.join();
    ASSERT_FALSE(second.has_value());
    EXPECT_EQ(second.error().code, ErrorCode::aborted) << second.error().message;
    // Request "a" is untouched.
    auto still = (*first)->wait_for_completion(Duration(0));
    EXPECT_EQ(still.error().code, ErrorCode::deadline_exceeded);
}

TEST_F(ShmCreditTest, CloseAbortsWaitsAndBlockedPuts) {
    auto out = sender(1);
    auto first = out->put_async(pattern(100, 1), "a");
    ASSERT_TRUE(first.has_value());
    Status waited;
    Result<std::unique_ptr<PutOperation>> second = fail(ErrorCode::internal, "not run");
    std::thread waiter([&] { waited = (*first)->wait_for_completion(kHangGuard); });
    std::thread blocked([&] { second = out->put_async(pattern(100, 2), "b"); });
    ASSERT_TRUE(eventually([&] { return out->blocked_senders() == 1; }));
    out->close();
    waiter.join();
    blocked.join();
    ASSERT_FALSE(waited.has_value());
    EXPECT_EQ(waited.error().code, ErrorCode::aborted);
    ASSERT_FALSE(second.has_value());
    EXPECT_EQ(second.error().code, ErrorCode::aborted);
}

TEST_F(ShmCreditTest, OutOfCreditsFailsOnlyAfterTheCreditWait) {
    auto out = make(options("sender", kSlot, 1), {.credit_wait = std::chrono::milliseconds(30)});
    auto first = out->put_async(pattern(100, 1), "request");
    ASSERT_TRUE(first.has_value());
    auto start = std::chrono::steady_clock::now();
    auto second = out->put_async(pattern(100, 2), "request");
    ASSERT_FALSE(second.has_value());
    EXPECT_EQ(second.error().code, ErrorCode::deadline_exceeded) << second.error().message;
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(30));
}

TEST_F(ShmCreditTest, ReceiverCleanupDropsPendingGets) {
    for (bool zero_copy : {false, true}) {
        auto out = sender(1);
        auto in = receiver(zero_copy);
        auto put = out->put_async(pattern(100, 1), "request");
        ASSERT_TRUE(put.has_value());
        auto get = in->get_async((*put)->metadata(), Tensor(), "request");
        ASSERT_TRUE(get.has_value());
        in->cleanup("request");
        auto result = (*get)->wait_for_completion(kHangGuard);
        ASSERT_FALSE(result.has_value());
        EXPECT_EQ(result.error().code, ErrorCode::aborted);
        EXPECT_FALSE((*get)->tensor().defined());
        // Dropping the view the operation held gave the sender its credit back.
        EXPECT_TRUE((*put)->wait_for_completion(kHangGuard).has_value()) << zero_copy;
    }
}

TEST_F(ShmCreditTest, SenderCleanupWhileAViewIsHeldWaitsForTheView) {
    auto out = sender(1);
    auto in = receiver(/*zero_copy=*/true);
    auto put = out->put_async(pattern(100, 1), "request");
    ASSERT_TRUE(put.has_value());
    auto get = in->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_TRUE(get.has_value());
    Tensor view = (*get)->tensor();
    get->reset();
    out->cleanup("request");
    EXPECT_EQ((*put)->wait_for_completion(kHangGuard).error().code, ErrorCode::aborted);
    // The memory is still the reader's: the bytes stay, and the credit waits for the view.
    EXPECT_TRUE(same_bytes(view, pattern(100, 1)));
    std::atomic<bool> dropped{false};
    bool dropped_before_put_returned = false;
    std::thread blocked([&] {
        EXPECT_TRUE(out->put_async(pattern(100, 2), "next").has_value());
        dropped_before_put_returned = dropped.load();
    });
    ASSERT_TRUE(eventually([&] { return out->blocked_senders() == 1; }));
    dropped = true;
    view = Tensor();
    blocked.join();
    EXPECT_TRUE(dropped_before_put_returned);
}

}  // namespace
}  // namespace omnirt::relay::testing

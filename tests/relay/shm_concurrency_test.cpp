// Many senders, many threads, one receiver, few credits: every transfer arrives intact, in
// copy and zero-copy mode, while views are held and while requests are cleaned up at random.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "shm_test_support.h"

namespace omnirt::relay::testing {
namespace {

constexpr std::size_t kSlot = 4096;
constexpr int kSenders = 4;
constexpr int kThreadsPerSender = 2;
constexpr int kReaders = 3;
constexpr int kPerThread = 150;
constexpr std::size_t kSizes[] = {0, 1, 100, 3000, kSlot, kSlot + 1, 20000};

struct Item {
    Value metadata;
    std::uint32_t seed = 0;
    std::size_t nbytes = 0;
    std::string request_id;
};

// The control plane of the test: metadata goes from sender threads to reader threads.
class Channel {
  public:
    void push(Item item) {
        std::lock_guard lock(mutex_);
        items_.push_back(std::move(item));
        changed_.notify_one();
    }
    void close() {
        std::lock_guard lock(mutex_);
        closed_ = true;
        changed_.notify_all();
    }
    std::optional<Item> try_pop() {
        std::lock_guard lock(mutex_);
        return pop_locked();
    }
    std::optional<Item> pop() {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, kHangGuard, [&] { return closed_ || !items_.empty(); });
        return pop_locked();
    }

  private:
    std::optional<Item> pop_locked() {
        if (items_.empty()) return std::nullopt;
        Item item = std::move(items_.front());
        items_.pop_front();
        return item;
    }
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Item> items_;
    bool closed_ = false;
};

class ShmConcurrencyTest : public ShmRelayTest {
  protected:
    void SetUp() override {
        ShmRelayTest::SetUp();
        for (int i = 0; i < kSenders; ++i) {
            senders_.push_back(
                make(options("sender" + std::to_string(i), kSlot, 3), {.credit_wait = kHangGuard}));
        }
        receiver_ = make(options("receiver", kSlot, 1, /*zero_copy=*/true));
    }

    // Each sender thread keeps a few transfers in flight and waits for the oldest; metadata
    // goes out before the wait, as the relay contract requires.
    void run_sender(int sender, int thread, bool tolerate_aborts) {
        std::deque<std::unique_ptr<PutOperation>> in_flight;
        auto finish_oldest = [&] {
            auto status = in_flight.front()->wait_for_completion(kHangGuard);
            if (!status) {
                EXPECT_TRUE(tolerate_aborts) << status.error().to_string();
                EXPECT_EQ(status.error().code, ErrorCode::aborted) << status.error().message;
            }
            in_flight.pop_front();
        };
        for (int i = 0; i < kPerThread; ++i) {
            const std::uint32_t seed = (sender * kThreadsPerSender + thread) * 100000 + i;
            const std::size_t nbytes = kSizes[seed % std::size(kSizes)];
            const std::string request_id = "r" + std::to_string(seed % 7);
            auto put = [&]() -> Result<std::unique_ptr<PutOperation>> {
                if (i % 3 != 0)
                    return senders_[sender]->put_async(pattern(nbytes, seed), request_id);
                OMNI_TRY(Tensor buffer, senders_[sender]->allocate_send_buffer(nbytes));
                if (nbytes > 0)
                    std::memcpy(buffer.mutable_data(), pattern(nbytes, seed).data(), nbytes);
                return senders_[sender]->put_async(buffer, request_id);
            }();
            if (!put) {
                EXPECT_TRUE(tolerate_aborts) << put.error().to_string();
                continue;
            }
            channel_.push({(*put)->metadata(), seed, nbytes, request_id});
            in_flight.push_back(std::move(*put));
            if (in_flight.size() > 4) finish_oldest();
        }
        while (!in_flight.empty()) finish_oldest();
    }

    // Reader threads alternate copies into a destination with zero-copy views, holding up to
    // two views at a time but never while waiting for more work.
    void run_reader(int reader, bool tolerate_failures) {
        std::deque<Tensor> held;
        int count = 0;
        while (true) {
            std::optional<Item> item = channel_.try_pop();
            if (!item) {
                held.clear();
                item = channel_.pop();
                if (!item) return;
            }
            Tensor dest;
            if (++count % 2 == 0) {
                dest = *Tensor::empty({static_cast<std::int64_t>(item->nbytes)}, DType::u8);
            }
            auto get = receiver_->get_async(item->metadata, dest, item->request_id);
            if (!get) {
                EXPECT_TRUE(tolerate_failures) << get.error().to_string();
                continue;
            }
            if (!(*get)->wait_for_completion(kHangGuard)) {
                EXPECT_TRUE(tolerate_failures);
                continue;
            }
            Tensor tensor = (*get)->tensor();
            if (tolerate_failures && !tensor.defined()) continue;  // cleaned up meanwhile
            ASSERT_TRUE(same_bytes(tensor, pattern(item->nbytes, item->seed)))
                << "seed " << item->seed << " reader " << reader;
            received_.fetch_add(1);
            held.push_back(std::move(tensor));
            if (held.size() > 2) held.pop_front();
        }
    }

    void run(bool with_cleanup) {
        std::vector<std::thread> readers;
        for (int r = 0; r < kReaders; ++r) {
            readers.emplace_back([this, r, with_cleanup] { run_reader(r, with_cleanup); });
        }
        std::atomic<bool> senders_done{false};
        std::thread cleaner;
        if (with_cleanup) {
            cleaner = std::thread([&] {
                std::mt19937 random(1);
                while (!senders_done.load()) {
                    const std::string request_id = "r" + std::to_string(random() % 7);
                    senders_[random() % kSenders]->cleanup(request_id);
                    receiver_->cleanup(request_id);
                    std::this_thread::yield();
                }
            });
        }
        std::vector<std::thread> senders;
        for (int s = 0; s < kSenders; ++s) {
            for (int t = 0; t < kThreadsPerSender; ++t) {
                senders.emplace_back(
                    [this, s, t, with_cleanup] { run_sender(s, t, with_cleanup); });
            }
        }
        for (auto& thread : senders) thread.join();
        senders_done = true;
        if (cleaner.joinable()) cleaner.join();
        channel_.close();
        for (auto& thread : readers) thread.join();
    }

    std::vector<std::unique_ptr<ShmRelay>> senders_;
    std::unique_ptr<ShmRelay> receiver_;
    Channel channel_;
    std::atomic<int> received_{0};
};

TEST_F(ShmConcurrencyTest, ManySendersAndReadersDeliverEveryTransfer) {
    run(/*with_cleanup=*/false);
    EXPECT_EQ(received_.load(), kSenders * kThreadsPerSender * kPerThread);
    for (auto& sender : senders_) sender->close();
    receiver_->close();
    EXPECT_TRUE(segments().empty());
}

TEST_F(ShmConcurrencyTest, RandomCleanupsNeverCorruptWhatIsRead) {
    run(/*with_cleanup=*/true);
    // Every transfer ended in a read, a refusal or an abort; what was read was intact.
    for (auto& sender : senders_) sender->close();
    receiver_->close();
    EXPECT_TRUE(segments().empty());
}

}  // namespace
}  // namespace omnirt::relay::testing

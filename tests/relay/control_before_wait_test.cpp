// Control-before-wait (communication.md, "Streaming Flow"): a sender must send the control
// message before it waits for its put to complete. With a credit-based backend the receiver's
// read is what completes the put, so the opposite order can never finish. The control channel is
// a queue standing in for ZMQ; the backend is shm with one credit.
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "config/runtime_dir.h"
#include "relay/shm/shm_relay.h"

namespace omnirt::relay {
namespace {

using namespace std::chrono_literals;

class ControlChannel {
  public:
    void send(Value metadata) {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(metadata));
        changed_.notify_all();
    }
    // nullopt once closed and drained.
    std::optional<Value> receive() {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return std::nullopt;
        Value v = std::move(queue_.front());
        queue_.pop_front();
        return v;
    }
    void close() {
        std::lock_guard lock(mutex_);
        closed_ = true;
        changed_.notify_all();
    }

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Value> queue_;
    bool closed_ = false;
};

class ControlBeforeWait : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::move(*config::RuntimeDirectory::create(::testing::TempDir()));
        RelayOptions options{.backend = "shm",
                             .name = "sender",
                             .runtime_dir = dir_->path(),
                             .slot_bytes = 1 << 20,
                             .credits = 1};
        sender_ = std::move(*create_shm_relay(options));
        options.name = "receiver";
        receiver_ = std::move(*create_shm_relay(options));
        // The receiving stage: reads whatever the control channel announces.
        reader_ = std::thread([this] {
            while (auto metadata = channel_.receive()) {
                auto get = receiver_->get_async(*metadata, Tensor(), "r");
                ASSERT_TRUE(get.has_value()) << get.error().message;
                ASSERT_TRUE((*get)->wait_for_completion(60s).has_value());
            }
        });
    }
    void TearDown() override {
        channel_.close();
        reader_.join();
        sender_->close();
        receiver_->close();
    }

    std::unique_ptr<config::RuntimeDirectory> dir_;
    std::unique_ptr<Relay> sender_, receiver_;
    ControlChannel channel_;
    std::thread reader_;
};

TEST_F(ControlBeforeWait, OurOrderCompletesEveryTransferWithOneCredit) {
    for (int i = 0; i < 20; ++i) {
        auto put = sender_->put_async(*Tensor::empty({1 << 19}, DType::u8), "r");
        ASSERT_TRUE(put.has_value()) << put.error().message;
        channel_.send((*put)->metadata());               // control first
        auto status = (*put)->wait_for_completion(60s);  // then wait
        ASSERT_TRUE(status.has_value()) << status.error().message;
    }
}

TEST_F(ControlBeforeWait, WaitingBeforeTheControlMessageCannotComplete) {
    auto put = sender_->put_async(*Tensor::empty({1 << 19}, DType::u8), "r");
    ASSERT_TRUE(put.has_value());
    // Wait first: nobody has been told to read, so the put cannot complete. With no timeout this
    // is a deadlock; the bounded wait shows it as deadline_exceeded.
    auto status = (*put)->wait_for_completion(300ms);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::deadline_exceeded);
    // The only credit is still taken, so the next put could not even start; sending the control
    // message is what releases it.
    channel_.send((*put)->metadata());
    ASSERT_TRUE((*put)->wait_for_completion(60s).has_value());
    auto next = sender_->put_async(*Tensor::empty({1 << 19}, DType::u8), "r");
    ASSERT_TRUE(next.has_value());
    channel_.send((*next)->metadata());
    ASSERT_TRUE((*next)->wait_for_completion(60s).has_value());
}

}  // namespace
}  // namespace omnirt::relay

#include "control/control_plane.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "config/runtime_dir.h"

namespace omnirt::control {
namespace {

using namespace std::chrono_literals;
constexpr Duration kHangGuard = 30s;

// Collects messages delivered on the IO thread; waits without sleeping.
class Inbox {
  public:
    ControlPlane::Handler handler() {
        return [this](proto::ControlMessage message) {
            std::lock_guard lock(mutex_);
            messages_.push_back(std::move(message));
            changed_.notify_all();
        };
    }
    bool wait_for(std::size_t count) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, kHangGuard, [&] { return messages_.size() >= count; });
    }
    std::vector<proto::ControlMessage> take() {
        std::lock_guard lock(mutex_);
        return std::move(messages_);
    }

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<proto::ControlMessage> messages_;
};

class ControlPlaneTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto dir = config::RuntimeDirectory::create(::testing::TempDir());
        ASSERT_TRUE(dir.has_value());
        dir_ = std::move(*dir);
    }
    std::string ipc(const std::string& name) { return "ipc://" + dir_->path() + "/" + name; }
    static std::unique_ptr<ControlPlane> make(ControlOptions options = {}) {
        auto plane = ControlPlane::create(options);
        EXPECT_TRUE(plane.has_value());
        return std::move(*plane);
    }
    std::unique_ptr<config::RuntimeDirectory> dir_;
};

proto::AbortMessage abort_message(int i) {
    return proto::AbortMessage{.request_id = "req-" + std::to_string(i), .reason = "test"};
}

TEST_F(ControlPlaneTest, PushPullOverIpcKeepsOrderPerSender) {
    Inbox inbox;
    auto receiver = make();
    ASSERT_TRUE(receiver->bind_pull(ipc("stage.sock"), inbox.handler()).has_value());
    ASSERT_TRUE(receiver->start().has_value());
    auto sender = make();
    ASSERT_TRUE(sender->start().has_value());
    for (int i = 0; i < 1000; ++i) {
        ASSERT_TRUE(sender->send(ipc("stage.sock"), abort_message(i)).has_value());
    }
    ASSERT_TRUE(inbox.wait_for(1000));
    auto messages = inbox.take();
    for (int i = 0; i < 1000; ++i) {
        EXPECT_EQ(proto::request_id_of(messages[i]), "req-" + std::to_string(i));
    }
    EXPECT_EQ(receiver->stats().received, 1000u);
    EXPECT_EQ(sender->stats().sent, 1000u);
}

TEST_F(ControlPlaneTest, TcpOnAnOsAssignedPortWithManySendingThreads) {
    Inbox inbox;
    auto receiver = make();
    auto bound = receiver->bind_pull("tcp://127.0.0.1:*", inbox.handler());
    ASSERT_TRUE(bound.has_value()) << bound.error().message;
    std::string endpoint = *bound;
    EXPECT_EQ(endpoint.rfind("tcp://127.0.0.1:", 0), 0u);
    EXPECT_NE(endpoint, "tcp://127.0.0.1:*");
    ASSERT_TRUE(receiver->start().has_value());
    auto sender = make({.send_queue_capacity = 16});  // small: senders block, then proceed
    ASSERT_TRUE(sender->start().has_value());
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 500; ++i) {
                EXPECT_TRUE(sender->send(endpoint, abort_message(t * 1000 + i)).has_value());
            }
        });
    }
    for (auto& thread : threads) thread.join();
    ASSERT_TRUE(inbox.wait_for(2000));
    EXPECT_EQ(inbox.take().size(), 2000u);
}

TEST_F(ControlPlaneTest, SendBeforeTheReceiverBindsIsDelivered) {
    auto sender = make();
    ASSERT_TRUE(sender->start().has_value());
    ASSERT_TRUE(sender->send(ipc("late.sock"), abort_message(1)).has_value());
    Inbox inbox;
    auto receiver = make();
    ASSERT_TRUE(receiver->bind_pull(ipc("late.sock"), inbox.handler()).has_value());
    ASSERT_TRUE(receiver->start().has_value());
    ASSERT_TRUE(inbox.wait_for(1));
}

TEST_F(ControlPlaneTest, AbortPublishedRightAfterStartupReachesEverySubscriber) {
    auto coordinator = make();
    ASSERT_TRUE(coordinator->bind_publisher(ipc("abort.sock")).has_value());
    ASSERT_TRUE(coordinator->start().has_value());
    std::vector<std::unique_ptr<Inbox>> inboxes;
    std::vector<std::unique_ptr<ControlPlane>> stages;
    for (int i = 0; i < 5; ++i) {
        inboxes.push_back(std::make_unique<Inbox>());
        stages.push_back(make());
        ASSERT_TRUE(
            stages.back()->subscribe(ipc("abort.sock"), inboxes.back()->handler()).has_value());
        ASSERT_TRUE(stages.back()->start().has_value());
    }
    // The slow-joiner guard: publishing only after every subscription arrived loses nothing.
    ASSERT_TRUE(coordinator->wait_for_subscribers(5, kHangGuard).has_value());
    ASSERT_TRUE(coordinator->publish(abort_message(7)).has_value());
    for (auto& inbox : inboxes) {
        ASSERT_TRUE(inbox->wait_for(1));
        auto messages = inbox->take();
        ASSERT_TRUE(std::holds_alternative<proto::AbortMessage>(messages[0]));
        EXPECT_EQ(std::get<proto::AbortMessage>(messages[0]).request_id, "req-7");
    }
    auto timeout = coordinator->wait_for_subscribers(6, Duration(1));
    ASSERT_FALSE(timeout.has_value());
    EXPECT_EQ(timeout.error().code, ErrorCode::deadline_exceeded);

    // A subscriber that leaves and one that takes its place: the total received only grows
    // (supervision waits for a restarted stage's subscription this way).
    EXPECT_EQ(coordinator->subscriptions_received(), 5u);
    stages.back()->stop();
    stages.back() = make();
    ASSERT_TRUE(stages.back()->subscribe(ipc("abort.sock"), inboxes.back()->handler()).has_value());
    ASSERT_TRUE(stages.back()->start().has_value());
    auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (coordinator->subscriptions_received() < 6u &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // hang-guarded poll
    EXPECT_EQ(coordinator->subscriptions_received(), 6u);
}

TEST_F(ControlPlaneTest, MalformedAndOversizedMessagesAreDroppedAndCounted) {
    Inbox inbox;
    auto receiver = make({.max_message_bytes = 1024});
    ASSERT_TRUE(receiver->bind_pull(ipc("stage.sock"), inbox.handler()).has_value());
    ASSERT_TRUE(receiver->start().has_value());
    auto sender = make();
    ASSERT_TRUE(sender->start().has_value());
    ASSERT_TRUE(sender->send_bytes(ipc("stage.sock"), {0xc1, 0x00}).has_value());  // invalid
    ASSERT_TRUE(sender->send_bytes(ipc("stage.sock"), {}).has_value());            // empty
    ASSERT_TRUE(
        sender->send_bytes(ipc("stage.sock"), std::vector<std::uint8_t>(4096, 0x90)).has_value());
    proto::ShutdownMessage big{.reason = std::string(2000, 'x')};
    ASSERT_TRUE(sender->send(ipc("stage.sock"), big).has_value());
    // A good message after the bad ones still arrives: the receiver keeps running.
    ASSERT_TRUE(sender->send(ipc("stage.sock"), abort_message(1)).has_value());
    ASSERT_TRUE(inbox.wait_for(1));
    EXPECT_EQ(inbox.take().size(), 1u);
    EXPECT_EQ(receiver->stats().dropped_malformed, 2u);
    EXPECT_EQ(receiver->stats().dropped_oversized, 2u);
}

TEST_F(ControlPlaneTest, StopFlushesQueuedMessagesAndRemovesSocketFiles) {
    Inbox inbox;
    auto receiver = make();
    ASSERT_TRUE(receiver->bind_pull(ipc("stage.sock"), inbox.handler()).has_value());
    ASSERT_TRUE(receiver->start().has_value());
    {
        auto sender = make();
        ASSERT_TRUE(sender->start().has_value());
        for (int i = 0; i < 100; ++i)
            ASSERT_TRUE(sender->send(ipc("stage.sock"), abort_message(i)).has_value());
        sender->stop(kHangGuard);
        auto after = sender->send(ipc("stage.sock"), abort_message(0));
        ASSERT_FALSE(after.has_value());
        EXPECT_EQ(after.error().code, ErrorCode::failed_precondition);
    }
    ASSERT_TRUE(inbox.wait_for(100));
    EXPECT_TRUE(std::filesystem::exists(dir_->path() + "/stage.sock"));
    receiver->stop();
    EXPECT_FALSE(std::filesystem::exists(dir_->path() + "/stage.sock"));
}

TEST_F(ControlPlaneTest, BindErrorsAreReported) {
    auto plane = make();
    auto bad = plane->bind_pull("ipc:///nonexistent-dir/x.sock", Inbox().handler());
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().message.find("cannot bind ipc:///nonexistent-dir/x.sock"),
              std::string::npos);
    auto garbage = plane->bind_pull("bogus://x", Inbox().handler());
    ASSERT_FALSE(garbage.has_value());
    ASSERT_FALSE(plane->publish(abort_message(1)).has_value());  // no publisher
    ASSERT_TRUE(plane->start().has_value());
    EXPECT_FALSE(plane->bind_pull(ipc("x.sock"), Inbox().handler()).has_value());
}

}  // namespace
}  // namespace omnirt::control

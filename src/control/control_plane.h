#pragma once
// The ZMQ control plane of one participant (a stage process or the coordinator), as
// communication.md describes it: each stage binds a PULL for work; the coordinator binds a PULL
// for completions and streams and a PUB for abort broadcasts, which stages SUB to. Messages go
// out through PUSH sockets connected on first use.
//
// Threading: one IO thread owns every socket. send() and publish() may be called from any
// thread: they encode on the caller's thread and hand the bytes to the IO thread through a
// bounded queue, with an eventfd wake-up only when the IO thread is blocked in poll (no polling
// with sleeps; a busy IO thread sends what is queued before it polls again, and what a handler
// sends goes out right after the handler returns). Handlers run on the IO thread and must not
// block; hand blocking work to another thread's queue.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "proto/messages.h"

namespace omnirt::control {

using Duration = std::chrono::milliseconds;

struct ControlOptions {
    // Messages larger than this are dropped on receipt with a logged reason (and counted).
    std::size_t max_message_bytes = std::size_t{64} << 20;
    // ZMQ refuses messages above this outright (it resets the sending connection).
    std::size_t hard_message_limit = std::size_t{256} << 20;
    // Encoded messages waiting for the IO thread; senders on other threads block when full.
    std::size_t send_queue_capacity = 65536;
    proto::DecodeLimits decode_limits = proto::DecodeLimits::control();
};

struct ControlStats {
    std::atomic<std::uint64_t> received{0};
    std::atomic<std::uint64_t> sent{0};
    std::atomic<std::uint64_t> published{0};
    std::atomic<std::uint64_t> dropped_malformed{0};
    std::atomic<std::uint64_t> dropped_oversized{0};
};

class ControlPlane {
  public:
    // Called on the IO thread with every well-formed message a socket receives.
    using Handler = std::function<void(proto::ControlMessage message)>;

    [[nodiscard]] static Result<std::unique_ptr<ControlPlane>> create(ControlOptions options = {});
    ControlPlane(const ControlPlane&) = delete;
    ControlPlane& operator=(const ControlPlane&) = delete;
    ~ControlPlane();  // stop()

    // Set-up, before start(). Endpoints are "ipc://<path>" or "tcp://host:port"; a bind to
    // "tcp://host:*" takes a port from the OS. The binds return the endpoint actually bound.
    [[nodiscard]] Result<std::string> bind_pull(const std::string& endpoint, Handler handler);
    [[nodiscard]] Result<std::string> bind_publisher(const std::string& endpoint);
    [[nodiscard]] Status subscribe(const std::string& endpoint, Handler handler);
    [[nodiscard]] Status start();

    // Thread-safe. Queues `message` for `endpoint` (a peer's PULL). Fails when the plane is
    // stopped or the message cannot be encoded; delivery itself is asynchronous.
    [[nodiscard]] Status send(const std::string& endpoint, const proto::ControlMessage& message);
    // Raw bytes, for tests of malformed input.
    [[nodiscard]] Status send_bytes(const std::string& endpoint, std::vector<std::uint8_t> bytes);
    // Thread-safe. Broadcasts on the publisher.
    [[nodiscard]] Status publish(const proto::ControlMessage& message);

    // Blocks until `count` subscribers have joined the publisher, so that a broadcast right
    // after start-up reaches every stage (no slow-joiner window). deadline_exceeded otherwise.
    [[nodiscard]] Status wait_for_subscribers(std::size_t count, Duration timeout);
    [[nodiscard]] std::size_t subscriber_count() const;
    // Thread-safe, lock-free. Subscriptions the publisher has received since start; never
    // decreases (a subscriber that leaves is not subtracted), so a restarted subscriber shows as
    // one more.
    [[nodiscard]] std::size_t subscriptions_received() const;

    // Flushes what is queued (bounded by `linger`), joins the IO thread, closes every socket.
    // Idempotent; sends after stop() fail.
    void stop(Duration linger = Duration(1000));

    [[nodiscard]] const ControlStats& stats() const;

  private:
    struct State;
    explicit ControlPlane(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::control

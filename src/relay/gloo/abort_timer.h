#pragma once
// Runs a callback at a deadline unless it is disarmed first: one thread per relay that turns a
// wait_for_completion timeout into an abort of the c10d wait blocked in another thread. (Gloo's
// own wait timeout closes every connection of the process group, so a relay never lets it fire;
// see c10d_relay.cpp.) No libtorch here.
//
// Thread safety: arm and disarm may be called from any thread. Callbacks run on the timer's
// thread while it holds its lock: they must be short and must not call arm or disarm.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace omnirt::relay {

class AbortTimer {
  public:
    using Clock = std::chrono::steady_clock;
    using Ticket = std::pair<Clock::time_point, std::uint64_t>;

    AbortTimer();
    AbortTimer(const AbortTimer&) = delete;
    AbortTimer& operator=(const AbortTimer&) = delete;
    // Stops the thread; callbacks still armed never run.
    ~AbortTimer();

    // Runs `on_expiry` once at `deadline` (at once when it has passed).
    [[nodiscard]] Ticket arm(Clock::time_point deadline, std::function<void()> on_expiry);
    // After this returns the callback of `ticket` is not running and will not run (it may
    // have run already). Unknown or expired tickets are ignored.
    void disarm(const Ticket& ticket);

  private:
    void run();

    std::mutex mutex_;
    std::condition_variable wake_;
    std::map<Ticket, std::function<void()>> armed_;
    std::uint64_t next_id_ = 0;
    bool stopping_ = false;
    std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace omnirt::relay

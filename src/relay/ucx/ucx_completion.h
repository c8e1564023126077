#pragma once
// A one-shot outcome that one thread sets and others wait for.
//
// Thread safety: all methods may be called from any thread.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "core/error.h"

namespace omnirt::relay::ucx {

class Completion {
  public:
    // The first call wins; later calls are ignored. True when this call set the outcome.
    bool set(Status status) {
        {
            std::lock_guard lock(mutex_);
            if (status_.has_value()) return false;
            status_ = std::move(status);
        }
        changed_.notify_all();
        return true;
    }

    // The outcome, or nullopt when `timeout` passed first. Never blocks for a zero timeout.
    [[nodiscard]] std::optional<Status> wait(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        auto now = std::chrono::steady_clock::now();
        // Compared in milliseconds: Duration::max() in nanoseconds would overflow.
        auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::time_point::max() - now);
        auto deadline =
            timeout >= limit ? std::chrono::steady_clock::time_point::max() : now + timeout;
        changed_.wait_until(lock, deadline, [&] { return status_.has_value(); });
        return status_;
    }

    [[nodiscard]] bool is_set() const {
        std::lock_guard lock(mutex_);
        return status_.has_value();
    }

  private:
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::optional<Status> status_;
};

}  // namespace omnirt::relay::ucx

#pragma once
// Thread-leak checks for tests. A joined thread leaves /proc/self/task a moment after
// pthread_join returns (the kernel wakes the joiner before it releases the task), so a check
// made right after a join must wait for the count to come down; the timeout is a hang guard.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <thread>

namespace omnirt::testing {

inline std::size_t process_thread_count() {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/task")) {
        ++count;
    }
    return count;
}

// True when the thread count comes down to `expected` (it never waits for threads to appear).
inline bool thread_count_settles_to(std::size_t expected,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (process_thread_count() > expected) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return process_thread_count() == expected;
}

}  // namespace omnirt::testing

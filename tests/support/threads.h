#pragma once
// Thread-leak checks for tests. A joined thread leaves /proc/self/task a moment after
// pthread_join returns (the kernel wakes the joiner before it releases the task), so a check
// made right after a join must wait for the count to come down; the timeout is a hang guard.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <pthread.h>

namespace omnirt::testing {

inline std::size_t process_thread_count() {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/task")) {
        ++count;
    }
    return count;
}

// The thread count to compare a test's end with: a thread is started and joined first (it
// starts what sanitizer runtimes start lazily with a process's first thread), and the count is
// taken once that thread has left /proc/self/task (found by its name), so it is not counted.
inline std::size_t thread_count_after_warm_up(
    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    constexpr const char* kName = "omnirt-warm-up";
    std::thread([] { pthread_setname_np(pthread_self(), kName); }).join();
    const auto warm_up_present = [] {
        for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
            std::string name;
            std::getline(std::ifstream(entry.path() / "comm"), name);
            if (name == kName) return true;
        }
        return false;
    };
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (warm_up_present() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return process_thread_count();
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

#pragma once
// Process-shared futex waits on 32-bit atomics that live in shared memory. The futexes are
// shared (no FUTEX_PRIVATE_FLAG), so a waiter in one process is woken by a store and wake in
// another process that maps the same segment, at any address.
//
// Thread safety: all functions may be called from any thread.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace omnirt::relay::shm {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

// Sleeps while `*word == expected`, for at most `timeout`. Returns when woken, when the value
// differs (at the call or later, after a wake), on a signal or on timeout; callers re-check
// their condition in a loop. Never sleeps for a non-positive timeout.
void futex_wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::chrono::nanoseconds timeout);
// Wakes every waiter on `word`.
void futex_wake_all(const std::atomic<std::uint32_t>& word);

}  // namespace omnirt::relay::shm

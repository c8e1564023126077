#include "relay/shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace omnirt::relay::shm {
namespace {

std::uint32_t* address(const std::atomic<std::uint32_t>& word) {
    // The futex syscall wants the plain word; std::atomic<uint32_t> has its layout (asserted).
    return reinterpret_cast<std::uint32_t*>(const_cast<std::atomic<std::uint32_t>*>(&word));
}

}  // namespace

void futex_wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::chrono::nanoseconds timeout) {
    if (timeout.count() <= 0) return;
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    timespec relative{};
    relative.tv_sec = static_cast<time_t>(seconds.count());
    relative.tv_nsec = static_cast<long>((timeout - seconds).count());
    // EAGAIN (value differs), EINTR and ETIMEDOUT all mean "re-check": nothing to report.
    syscall(SYS_futex, address(word), FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void futex_wake_all(const std::atomic<std::uint32_t>& word) {
    syscall(SYS_futex, address(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace omnirt::relay::shm

#pragma once
// Internal to child_process*.cpp: the state behind ChildProcess and a poll deadline helper.
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "runner/child_process.h"

namespace omnirt::runner {

[[nodiscard]] std::string errno_message(std::string_view what, int error);

// A poll(2) deadline; no timeout means forever.
class Deadline {
  public:
    explicit Deadline(std::optional<Duration> timeout) {
        if (timeout) end_ = std::chrono::steady_clock::now() + *timeout;
    }
    [[nodiscard]] bool expired() const { return end_ && std::chrono::steady_clock::now() >= *end_; }
    [[nodiscard]] std::optional<Duration> remaining() const {
        if (!end_) return std::nullopt;
        auto left = *end_ - std::chrono::steady_clock::now();
        return std::max(Duration(0), std::chrono::ceil<Duration>(left));
    }
    // For poll: -1 = forever; saturates at INT_MAX milliseconds.
    [[nodiscard]] int remaining_ms() const {
        if (!end_) return -1;
        auto left = remaining()->count();
        return left > 0x7fffffff ? 0x7fffffff : static_cast<int>(left);
    }

  private:
    std::optional<std::chrono::steady_clock::time_point> end_;
};

struct ChildProcess::State {
    ChildSpec spec;
    int pid = -1;
    int pidfd = -1;

    // Ready protocol: owner thread only.
    int ready_fd = -1;  // read end, non-blocking; closed once settled
    std::string ready_buffer;
    bool ready_eof = false;
    std::optional<Status> ready_result;

    // The exit status, set once by whichever thread reaps first (the owner or a Supervisor).
    std::mutex mutex;
    std::optional<ExitStatus> exit_status;

    State() = default;
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State();

    // Thread-safe. Reaps the child if it has exited (blocking: waits for it); the cached status
    // once reaped.
    std::optional<ExitStatus> reap(bool block);
    // Thread-safe; a no-op once reaped (the pid may have been reused).
    void send_signal(int sig);
    // Waits for the pidfd to become readable (the child exited); false on timeout.
    bool wait_exit(std::optional<Duration> timeout);

    // Reads what the pipe holds now (up to the line limit); sets ready_eof at end of file.
    void drain_ready_pipe();
    // The first line (without '\n') once one is complete, removed from the buffer.
    std::optional<std::string> take_ready_line();
    // "ready" -> ok; "error: [code: ]message" -> that error; anything else failed_precondition.
    Status parse_ready_line(const std::string& line) const;
};

}  // namespace omnirt::runner

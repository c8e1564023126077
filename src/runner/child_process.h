#pragma once
// ChildProcess: one process-group child of the `omnirt` binary, started with its resolved spec.
//
//   parent: ChildProcess::spawn({binary, args}) -> child runs `omnirt stage-process ...`
//           child->wait_ready(timeout): the child wrote "ready\n" (or "error: <message>\n") on
//           the ready pipe, whose write end it receives as fd 3.
//   the child gets PR_SET_PDEATHSIG(SIGKILL) so it never outlives a crashed parent.
//
// RAII: destroying a running child sends SIGTERM, waits up to `terminate_grace`, then SIGKILLs
// and reaps it. Thread safety: one owner thread; pid() / pidfd() may be read from any thread.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::runner {

using Duration = std::chrono::milliseconds;

struct ChildSpec {
    std::string name;  // for messages ("process 'thinker'")
    std::string binary;
    std::vector<std::string> args;                         // argv[1..]
    std::vector<std::pair<std::string, std::string>> env;  // added to the parent's environment
};

struct ExitStatus {
    bool exited = false;  // normal exit (code) vs signal
    int code = 0;
    int signal = 0;
    [[nodiscard]] std::string to_string()
        const;  // "exited with code 1", "killed by signal 9 (Killed)"
};

class ChildProcess {
  public:
    [[nodiscard]] static Result<std::unique_ptr<ChildProcess>> spawn(ChildSpec spec);
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;
    ~ChildProcess();

    // ok once the child reported ready; its error message when it reported one; unavailable
    // with the exit status when it died first; deadline_exceeded after `timeout`.
    [[nodiscard]] Status wait_ready(Duration timeout);

    // Non-blocking: the exit status once the child has exited (reaps it).
    [[nodiscard]] std::optional<ExitStatus> poll_exit();
    // Blocks until the child exits (reaping it) or `timeout` passes (nullopt).
    [[nodiscard]] std::optional<ExitStatus> wait_exit(Duration timeout);
    // Sends SIGTERM, waits up to `grace`, then SIGKILL; returns the exit status.
    ExitStatus terminate(Duration grace = Duration(5000));
    void kill_now();  // SIGKILL, for tests of supervision

    [[nodiscard]] int pid() const;
    [[nodiscard]] int pidfd() const;  // readable when the child exits (for poll)
    [[nodiscard]] const std::string& name() const;

  private:
    struct State;
    explicit ChildProcess(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

// Watches children on one thread (poll on their pidfds plus an eventfd) and calls `on_exit`
// once for each child that exits while watched. on_exit runs on the supervisor thread.
class Supervisor {
  public:
    using ExitCallback = std::function<void(const std::string& name, const ExitStatus& status)>;
    [[nodiscard]] static Result<std::unique_ptr<Supervisor>> create(ExitCallback on_exit);
    ~Supervisor();  // stop()
    // Starts watching (the child must outlive the watch: call unwatch or stop before destroying
    // it).
    [[nodiscard]] Status watch(ChildProcess* child);
    void unwatch(ChildProcess* child);
    void stop();

  private:
    struct State;
    explicit Supervisor(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::runner

// ChildProcess: fork + execve with a ready pipe on fd 3, a pidfd for exit notification and
// race-free signalling and reaping (pidfd_send_signal, waitid(P_PIDFD)), so a recycled pid can
// never be hit.
//
// Process group: children stay in the parent's process group (no setpgid). The instance is one
// job to the shell: terminal Ctrl-C / Ctrl-Z and a signal sent to the group (timeout(1), a
// service manager) reach every process of the instance at once. A stage process stops cleanly on
// SIGTERM by itself and ignores SIGINT, so that Ctrl-C leaves the shutdown to the parent (which
// drains first; see `omnirt stage-process`). A private group would hide children from job control
// (a stopped parent would leave them running). The price: after Ctrl-C the parent sees its
// children exit while it shuts down, so supervision treats exits after shutdown began as expected.
#include "runner/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "runner/child_process_internal.h"

extern char** environ;

namespace omnirt::runner {
namespace {

constexpr int kReadyFd = 3;
// Pipe ends are moved at or above this before fork, so dup2 onto fd 3 never clobbers one.
constexpr int kHighFd = 10;
constexpr std::size_t kMaxReadyLine = 4096;
constexpr Duration kDestructorGrace{5000};

void close_fd(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
}

Result<int> move_high(int fd) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, kHighFd);
    int error = errno;
    close(fd);
    if (high < 0) return fail(ErrorCode::resource_exhausted, errno_message("fcntl", error));
    return high;
}

// Closes fds [first, last] (async-signal-safe). close_range needs Linux 5.9; before that, a loop
// over the fds a process may have open by default.
void close_fds(unsigned first, unsigned last) {
    if (first > last) return;
    if (syscall(SYS_close_range, first, last, 0) == 0) return;
    constexpr unsigned kFallbackLimit = 65536;
    for (unsigned fd = first; fd <= last && fd < kFallbackLimit; ++fd) close(static_cast<int>(fd));
}

// Child side of spawn, between fork and execve: async-signal-safe calls only.
[[noreturn]] void exec_child(int ready_fd, int exec_error_fd, pid_t parent, const char* binary,
                             char* const* argv, char* const* envp) {
    auto die = [exec_error_fd](int error) {
        ssize_t ignored = write(exec_error_fd, &error, sizeof error);
        (void)ignored;
        _exit(127);
    };
    // Inherited blocked signals and ignored dispositions survive execve; start clean.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &default_action, nullptr);
    }
    // Die with the parent. The death signal fires when the thread that forked exits, so spawn
    // from a long-lived thread. The parent may have died before prctl took effect: check.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(errno);
    if (getppid() != parent) _exit(127);
    if (dup2(ready_fd, kReadyFd) < 0) die(errno);  // dup2 clears FD_CLOEXEC on fd 3
    // Close everything above fd 3 except the exec error pipe, which is close-on-exec.
    auto error_fd = static_cast<unsigned>(exec_error_fd);
    close_fds(kReadyFd + 1, error_fd - 1);
    close_fds(error_fd + 1, ~0U);
    execve(binary, argv, envp);
    die(errno);
    _exit(127);
}

std::vector<std::string> child_environment(const ChildSpec& spec) {
    std::vector<std::string> env;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        std::string_view text(*entry);
        std::string_view name = text.substr(0, text.find('='));
        bool overridden = false;
        for (const auto& [key, value] : spec.env) overridden = overridden || key == name;
        if (!overridden) env.emplace_back(text);
    }
    for (const auto& [key, value] : spec.env) env.push_back(key + "=" + value);
    return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

// Waits for the child's exec: EOF on the close-on-exec pipe means execve succeeded; an int
// means it failed with that errno.
int read_exec_error(int fd) {
    int error = 0;
    std::size_t got = 0;
    while (got < sizeof error) {
        ssize_t n = read(fd, reinterpret_cast<char*>(&error) + got, sizeof error - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    return got == sizeof error ? error : 0;
}

}  // namespace

std::string errno_message(std::string_view what, int error) {
    return std::string(what) + ": " + std::strerror(error);
}

std::string ExitStatus::to_string() const {
    if (exited) return "exited with code " + std::to_string(code);
    if (signal > 0) {
        const char* description = sigdescr_np(signal);
        return "killed by signal " + std::to_string(signal) + " (" +
               (description != nullptr ? description : "unknown") + ")";
    }
    return "ended with an unknown status";
}

ChildProcess::ChildProcess(std::unique_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<ChildProcess>> ChildProcess::spawn(ChildSpec spec) {
    if (spec.binary.empty()) return fail(ErrorCode::invalid_argument, "child binary is empty");
    // Everything the child needs is built before fork: it may not allocate.
    std::vector<std::string> arg_strings{spec.binary};
    arg_strings.insert(arg_strings.end(), spec.args.begin(), spec.args.end());
    std::vector<std::string> env_strings = child_environment(spec);
    std::vector<char*> argv = pointers(arg_strings);
    std::vector<char*> envp = pointers(env_strings);

    int ready[2], exec_error[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        return fail(ErrorCode::resource_exhausted, errno_message("pipe", errno));
    }
    if (pipe2(exec_error, O_CLOEXEC) != 0) {
        int error = errno;
        close(ready[0]);
        close(ready[1]);
        return fail(ErrorCode::resource_exhausted, errno_message("pipe", error));
    }
    auto state = std::make_unique<State>();
    state->spec = std::move(spec);
    Status moved = ok_status();
    for (int* fd : {&ready[0], &ready[1], &exec_error[0], &exec_error[1]}) {
        auto high = move_high(*fd);
        *fd = high ? *high : -1;
        if (!high && moved) moved = fail(high.error());
    }
    int ready_write = ready[1], exec_error_write = exec_error[1];
    state->ready_fd = ready[0];
    fcntl(state->ready_fd, F_SETFL, O_NONBLOCK);
    int exec_error_read = exec_error[0];
    auto close_all = [&] {
        close_fd(ready_write);
        close_fd(exec_error_write);
        close_fd(exec_error_read);
    };
    if (!moved) {
        close_all();
        return fail(moved.error());
    }

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        exec_child(ready_write, exec_error_write, parent, arg_strings[0].c_str(), argv.data(),
                   envp.data());
    }
    if (pid < 0) {
        int error = errno;
        close_all();
        return fail(ErrorCode::resource_exhausted, errno_message("fork", error));
    }
    state->pid = pid;
    // The child is not reaped until we say so, so its pid is still ours to open.
    state->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    int pidfd_error = errno;
    close_fd(ready_write);
    close_fd(exec_error_write);
    int exec_errno = read_exec_error(exec_error_read);
    close_fd(exec_error_read);
    if (state->pidfd < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        return fail(ErrorCode::unimplemented, errno_message("pidfd_open", pidfd_error));
    }
    if (exec_errno != 0) {
        state->reap(true);
        return fail(ErrorCode::not_found, "process '" + state->spec.name + "': cannot run '" +
                                              state->spec.binary +
                                              "': " + std::strerror(exec_errno));
    }
    return std::unique_ptr<ChildProcess>(new ChildProcess(std::move(state)));
}

ChildProcess::~ChildProcess() {
    if (!state_) return;
    if (!state_->reap(false)) terminate(kDestructorGrace);
}

int ChildProcess::pid() const { return state_->pid; }
int ChildProcess::pidfd() const { return state_->pidfd; }
const std::string& ChildProcess::name() const { return state_->spec.name; }

std::optional<ExitStatus> ChildProcess::poll_exit() { return state_->reap(false); }

void ChildProcess::kill_now() { state_->send_signal(SIGKILL); }

std::optional<ExitStatus> ChildProcess::wait_exit(Duration timeout) {
    if (auto status = state_->reap(false)) return status;
    if (!state_->wait_exit(timeout)) return std::nullopt;
    return state_->reap(true);
}

ExitStatus ChildProcess::terminate(Duration grace) {
    if (auto status = state_->reap(false)) return *status;
    state_->send_signal(SIGTERM);
    if (!state_->wait_exit(grace)) {
        state_->send_signal(SIGKILL);
        state_->wait_exit(std::nullopt);
    }
    return *state_->reap(true);
}

// --- State ---------------------------------------------------------------------------------

ChildProcess::State::~State() {
    close_fd(ready_fd);
    close_fd(pidfd);
}

std::optional<ExitStatus> ChildProcess::State::reap(bool block) {
    std::lock_guard lock(mutex);
    if (exit_status) return exit_status;
    siginfo_t info{};
    int result;
    do {
        result = waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
                        WEXITED | (block ? 0 : WNOHANG));
    } while (result < 0 && errno == EINTR);
    if (result < 0) {
        // ECHILD: someone else reaped it (waitpid(-1) elsewhere); it is gone either way.
        exit_status = ExitStatus{};
        return exit_status;
    }
    if (info.si_pid == 0) return std::nullopt;
    ExitStatus status;
    if (info.si_code == CLD_EXITED) {
        status.exited = true;
        status.code = info.si_status;
    } else {
        status.signal = info.si_status;
    }
    exit_status = status;
    return exit_status;
}

void ChildProcess::State::send_signal(int sig) {
    std::lock_guard lock(mutex);
    if (exit_status) return;  // reaped: the pidfd no longer names a process we may signal
    syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0);
}

bool ChildProcess::State::wait_exit(std::optional<Duration> timeout) {
    Deadline deadline(timeout);
    while (true) {
        pollfd fd{pidfd, POLLIN, 0};
        int result = poll(&fd, 1, deadline.remaining_ms());
        if (result > 0) return true;
        if (result == 0 && deadline.expired()) return false;
        if (result < 0 && errno != EINTR) return false;
    }
}

// --- wait_ready ------------------------------------------------------------------------------

Status ChildProcess::wait_ready(Duration timeout) {
    State& s = *state_;
    if (s.ready_result) return *s.ready_result;
    Deadline deadline(timeout);
    auto settle = [&s](Status result) {
        s.ready_result = result;
        close_fd(s.ready_fd);
        return result;
    };
    auto not_ready = [&s](std::string what) {
        return fail(ErrorCode::unavailable,
                    "process '" + s.spec.name + "' " + std::move(what) + " before it was ready");
    };
    bool child_exited = false;
    while (true) {
        // A complete line settles it, even when the child exited right after writing it.
        if (auto line = s.take_ready_line()) return settle(s.parse_ready_line(*line));
        if (s.ready_buffer.size() > kMaxReadyLine) {
            return settle(fail(ErrorCode::failed_precondition,
                               "process '" + s.spec.name + "': ready line longer than " +
                                   std::to_string(kMaxReadyLine) + " bytes"));
        }
        if (child_exited) return settle(not_ready(s.reap(true)->to_string()));
        if (s.ready_eof) {
            // It closed fd 3 without a line: it is probably exiting; wait for its status.
            if (s.wait_exit(deadline.remaining())) {
                return settle(not_ready(s.reap(true)->to_string()));
            }
            return settle(not_ready("closed its ready pipe"));
        }
        pollfd fds[2] = {{s.ready_fd, POLLIN, 0}, {s.pidfd, POLLIN, 0}};
        int result = poll(fds, 2, deadline.remaining_ms());
        if (result < 0 && errno != EINTR) {
            return settle(fail(ErrorCode::internal, errno_message("poll", errno)));
        }
        if (result > 0 && fds[0].revents != 0) {
            s.drain_ready_pipe();
        } else if (result > 0 && fds[1].revents != 0) {
            // Exited: whatever it wrote is in the pipe now (a grandchild may hold the write end
            // open, so do not wait for end of file).
            s.drain_ready_pipe();
            child_exited = true;
        } else if (deadline.expired()) {
            // Not settled: a later call may still see the child get ready.
            return fail(ErrorCode::deadline_exceeded, "process '" + s.spec.name +
                                                          "' was not ready after " +
                                                          std::to_string(timeout.count()) + " ms");
        }
    }
}

void ChildProcess::State::drain_ready_pipe() {
    char buffer[512];
    while (!ready_eof && ready_buffer.size() <= kMaxReadyLine) {
        ssize_t n = read(ready_fd, buffer, sizeof buffer);
        if (n > 0) {
            ready_buffer.append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0) {
            ready_eof = true;
        } else if (errno != EINTR) {
            return;  // EAGAIN: nothing more for now
        }
    }
}

std::optional<std::string> ChildProcess::State::take_ready_line() {
    auto newline = ready_buffer.find('\n');
    if (newline == std::string::npos || newline > kMaxReadyLine) return std::nullopt;
    std::string line = ready_buffer.substr(0, newline);
    ready_buffer.erase(0, newline + 1);
    return line;
}

Status ChildProcess::State::parse_ready_line(const std::string& line) const {
    std::string prefix = "process '" + spec.name + "': ";
    if (line == "ready") return ok_status();
    constexpr std::string_view kError = "error: ";
    if (line.starts_with(kError)) {
        std::string_view message = std::string_view(line).substr(kError.size());
        // "error: not_found: message" carries the child's error code.
        for (int code = 0; code <= static_cast<int>(ErrorCode::internal); ++code) {
            auto error_code = static_cast<ErrorCode>(code);
            std::string name = std::string(to_string(error_code)) + ": ";
            if (message.starts_with(name)) {
                return fail(error_code, prefix + std::string(message.substr(name.size())));
            }
        }
        return fail(ErrorCode::failed_precondition, prefix + std::string(message));
    }
    std::string shown;
    for (char c : line.substr(0, 80)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return fail(ErrorCode::failed_precondition,
                prefix + "unexpected line on the ready pipe: '" + shown + "'");
}

}  // namespace omnirt::runner

#include "runner/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <vector>

namespace omnirt::runner {
namespace {

using std::chrono::milliseconds;

// Generous: only a hang guard on a loaded machine, never a synchronisation.
constexpr milliseconds kHangGuard{30000};

std::unique_ptr<ChildProcess> spawn_sh(const std::string& name, const std::string& script,
                                       std::vector<std::pair<std::string, std::string>> env = {}) {
    auto child = ChildProcess::spawn(
        {.name = name, .binary = "/bin/sh", .args = {"-c", script}, .env = std::move(env)});
    EXPECT_TRUE(child.has_value()) << child.error().message;
    return child ? std::move(*child) : nullptr;
}

// Waits (hang guard) for the child to exit by itself and reaps it.
ExitStatus wait_exit(ChildProcess& child) {
    pollfd fd{child.pidfd(), POLLIN, 0};
    EXPECT_EQ(poll(&fd, 1, static_cast<int>(kHangGuard.count())), 1);
    auto status = child.poll_exit();
    EXPECT_TRUE(status.has_value());
    return status.value_or(ExitStatus{});
}

// Threads of this process named `name` (a sanitizer's own threads do not count).
std::size_t threads_named(const std::string& name) {
    std::size_t count = 0;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        std::string comm;
        std::ifstream(task.path() / "comm") >> comm;
        if (comm == name) ++count;
    }
    return count;
}

// Every test must leave no child (running or zombie) and no thread behind.
class ChildProcessTest : public ::testing::Test {
  protected:
    void TearDown() override {
        siginfo_t info{};
        errno = 0;
        int result = waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
        EXPECT_TRUE(result == -1 && errno == ECHILD) << "a child process is left";
        EXPECT_EQ(threads_named("omnirt-superv"), 0u) << "a supervisor thread is left";
    }
};

TEST_F(ChildProcessTest, ReadyChildRunsUntilTerminated) {
    auto child = spawn_sh("ready", "echo ready >&3; exec sleep 1000");
    ASSERT_NE(child, nullptr);
    EXPECT_GT(child->pid(), 0);
    EXPECT_GE(child->pidfd(), 0);
    EXPECT_EQ(child->name(), "ready");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_TRUE(ready.has_value()) << ready.error().message;
    EXPECT_TRUE(child->wait_ready(kHangGuard).has_value());  // settled: same answer again
    EXPECT_FALSE(child->poll_exit().has_value());
    ExitStatus status = child->terminate(kHangGuard);
    EXPECT_FALSE(status.exited);
    EXPECT_EQ(status.signal, SIGTERM);
    EXPECT_EQ(status.to_string(), "killed by signal 15 (Terminated)");
    // Reaped and cached.
    ASSERT_TRUE(child->poll_exit().has_value());
    EXPECT_EQ(child->poll_exit()->signal, SIGTERM);
    EXPECT_EQ(child->terminate().signal, SIGTERM);
}

TEST_F(ChildProcessTest, ReadyLineStillCountsWhenTheChildExitsRightAfter) {
    auto child = spawn_sh("quick", "echo ready >&3; exit 4");
    ASSERT_TRUE(child->wait_ready(kHangGuard).has_value());
    ExitStatus status = wait_exit(*child);
    EXPECT_TRUE(status.exited);
    EXPECT_EQ(status.code, 4);
    EXPECT_EQ(status.to_string(), "exited with code 4");
}

TEST_F(ChildProcessTest, ErrorLineBecomesTheError) {
    auto child = spawn_sh("broken", "echo 'error: the model is missing' >&3; exit 1");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::failed_precondition);
    EXPECT_EQ(ready.error().message, "process 'broken': the model is missing");
    EXPECT_EQ(wait_exit(*child).code, 1);
}

TEST_F(ChildProcessTest, ErrorLineMayNameTheCode) {
    auto child = spawn_sh("coded", "echo 'error: not_found: unknown factory x' >&3");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::not_found);
    EXPECT_EQ(ready.error().message, "process 'coded': unknown factory x");
}

TEST_F(ChildProcessTest, ExitBeforeReadyIsUnavailableWithTheStatus) {
    auto child = spawn_sh("early", "exit 3");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::unavailable);
    EXPECT_EQ(ready.error().message, "process 'early' exited with code 3 before it was ready");
    // The status was reaped by wait_ready and is still reported.
    ASSERT_TRUE(child->poll_exit().has_value());
    EXPECT_EQ(child->poll_exit()->code, 3);
}

TEST_F(ChildProcessTest, DeathBySignalBeforeReady) {
    auto child = spawn_sh("crash", "kill -SEGV $$");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::unavailable);
    EXPECT_NE(ready.error().message.find("killed by signal 11 (Segmentation fault)"),
              std::string::npos)
        << ready.error().message;
}

TEST_F(ChildProcessTest, ExitWhileAGrandchildHoldsThePipe) {
    // The grandchild keeps fd 3 open, so only the pidfd tells that the child is gone.
    char dir[] = "/tmp/omnirt-child-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string pid_file = std::string(dir) + "/grandchild";
    auto child = spawn_sh("orphaning", "sleep 1000 & echo $! > " + pid_file + "; exit 2");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::unavailable);
    EXPECT_NE(ready.error().message.find("exited with code 2"), std::string::npos);
    // The orphaned sleep is not ours to reap; end it by its pid.
    int grandchild = 0;
    std::ifstream(pid_file) >> grandchild;
    ASSERT_GT(grandchild, 0);
    kill(grandchild, SIGKILL);
    std::filesystem::remove_all(dir);
}

TEST_F(ChildProcessTest, NeverReadyTimesOutAndCanBeAskedAgain) {
    auto child = spawn_sh("slow", "exec sleep 1000");
    auto ready = child->wait_ready(milliseconds(100));
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::deadline_exceeded);
    EXPECT_EQ(ready.error().message, "process 'slow' was not ready after 100 ms");
    // Not settled: a second wait still watches the child, which now dies.
    child->kill_now();
    ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::unavailable);
    EXPECT_NE(ready.error().message.find("killed by signal 9 (Killed)"), std::string::npos);
}

TEST_F(ChildProcessTest, ClosingThePipeWithoutALineIsNotReady) {
    auto child = spawn_sh("closer", "exec 3>&-; exec sleep 1000");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::unavailable);
    EXPECT_EQ(ready.error().message, "process 'closer' closed its ready pipe before it was ready");
}

TEST_F(ChildProcessTest, HostileReadyLines) {
    auto child = spawn_sh("chatty", "printf 'hello\\033[31m\\n' >&3; exec sleep 1000");
    auto ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_EQ(ready.error().code, ErrorCode::failed_precondition);
    EXPECT_EQ(ready.error().message,
              "process 'chatty': unexpected line on the ready pipe: 'hello?[31m'");
    child.reset();  // the destructor terminates it

    child = spawn_sh("endless", "printf '%9000s' x >&3; exec sleep 1000");
    ready = child->wait_ready(kHangGuard);
    ASSERT_FALSE(ready.has_value());
    EXPECT_NE(ready.error().message.find("ready line longer than"), std::string::npos);
}

TEST_F(ChildProcessTest, EnvironmentIsInheritedAndExtended) {
    setenv("OMNIRT_TEST_INHERITED", "parent", 1);
    setenv("OMNIRT_TEST_OVERRIDDEN", "parent", 1);
    auto child = spawn_sh("env",
                          "[ \"$OMNIRT_TEST_INHERITED\" = parent ] && "
                          "[ \"$OMNIRT_TEST_OVERRIDDEN\" = child ] && "
                          "[ \"$OMNIRT_TEST_ADDED\" = 'a=b' ] && echo ready >&3",
                          {{"OMNIRT_TEST_OVERRIDDEN", "child"}, {"OMNIRT_TEST_ADDED", "a=b"}});
    auto ready = child->wait_ready(kHangGuard);
    EXPECT_TRUE(ready.has_value()) << ready.error().message;
    EXPECT_EQ(wait_exit(*child).code, 0);
    unsetenv("OMNIRT_TEST_INHERITED");
    unsetenv("OMNIRT_TEST_OVERRIDDEN");
}

TEST_F(ChildProcessTest, OnlyStdioAndTheReadyPipeAreInherited) {
    // Careless fds of the parent (no O_CLOEXEC), below and above the ready pipe's fds.
    int low = open("/dev/null", O_RDONLY);
    int leaked = fcntl(low, F_DUPFD, 40);
    ASSERT_GE(low, 0);
    ASSERT_GE(leaked, 0);
    std::string script = "[ -e /proc/$$/fd/3 ] && [ ! -e /proc/$$/fd/" + std::to_string(leaked) +
                         " ] && [ ! -e /proc/$$/fd/4 ] && [ ! -e /proc/$$/fd/5 ] && echo ready >&3";
    auto child = spawn_sh("fds", script);
    auto ready = child->wait_ready(kHangGuard);
    EXPECT_TRUE(ready.has_value()) << ready.error().message;
    child->terminate(kHangGuard);
    close(leaked);
    close(low);
}

TEST_F(ChildProcessTest, BlockedAndIgnoredSignalsAreResetInTheChild) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, nullptr), 0);
    auto previous = signal(SIGINT, SIG_IGN);
    auto child = spawn_sh("signals", "echo ready >&3; exec sleep 1000");
    pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
    signal(SIGINT, previous);
    ASSERT_TRUE(child->wait_ready(kHangGuard).has_value());
    // SIGINT works in the child (it was not inherited as ignored) ...
    kill(child->pid(), SIGINT);
    pollfd fd{child->pidfd(), POLLIN, 0};
    ASSERT_EQ(poll(&fd, 1, static_cast<int>(kHangGuard.count())), 1);
    EXPECT_EQ(child->terminate(kHangGuard).signal, SIGINT);
    // ... and so does SIGTERM (it was not inherited as blocked).
    ASSERT_TRUE(pthread_sigmask(SIG_BLOCK, &term, nullptr) == 0);
    child = spawn_sh("signals", "echo ready >&3; exec sleep 1000");
    pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
    ASSERT_TRUE(child->wait_ready(kHangGuard).has_value());
    EXPECT_EQ(child->terminate(kHangGuard).signal, SIGTERM);
}

TEST_F(ChildProcessTest, WaitExitTimesOutThenReaps) {
    auto child = spawn_sh("waited", "echo ready >&3; exec sleep 1000");
    ASSERT_TRUE(child->wait_ready(kHangGuard).has_value());
    EXPECT_FALSE(child->wait_exit(milliseconds(50)).has_value());  // still running
    child->kill_now();
    auto status = child->wait_exit(kHangGuard);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(status->signal, SIGKILL);
    // Reaped: later calls return the same status at once.
    EXPECT_EQ(child->wait_exit(milliseconds(0))->signal, SIGKILL);
    EXPECT_EQ(child->terminate(kHangGuard).signal, SIGKILL);
}

TEST_F(ChildProcessTest, TerminateEscalatesToSigkillAfterTheGrace) {
    // An ignored SIGTERM survives exec, so sleep ignores it.
    auto child = spawn_sh("stubborn", "trap '' TERM; echo ready >&3; exec sleep 1000");
    ASSERT_TRUE(child->wait_ready(kHangGuard).has_value());
    ExitStatus status = child->terminate(milliseconds(100));
    EXPECT_EQ(status.signal, SIGKILL);
}

TEST_F(ChildProcessTest, DestructorStopsAndReapsARunningChild) {
    auto child = spawn_sh("owned", "echo ready >&3; exec sleep 1000");
    ASSERT_TRUE(child->wait_ready(kHangGuard).has_value());
    child.reset();  // TearDown checks that no child (not even a zombie) is left
}

TEST_F(ChildProcessTest, SpawnFailures) {
    auto missing = ChildProcess::spawn({.name = "ghost", .binary = "/nonexistent/omnirt"});
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_EQ(missing.error().message,
              "process 'ghost': cannot run '/nonexistent/omnirt': No such file or directory");
    char dir[] = "/tmp/omnirt-child-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string plain = std::string(dir) + "/plain";
    std::ofstream(plain) << "#!/bin/sh\n";
    chmod(plain.c_str(), 0644);
    auto not_executable = ChildProcess::spawn({.name = "x", .binary = plain});
    std::filesystem::remove_all(dir);
    ASSERT_FALSE(not_executable.has_value());
    EXPECT_NE(not_executable.error().message.find("Permission denied"), std::string::npos);
    auto empty = ChildProcess::spawn({.name = "x"});
    ASSERT_FALSE(empty.has_value());
    EXPECT_EQ(empty.error().code, ErrorCode::invalid_argument);
}

TEST_F(ChildProcessTest, ChildDiesWithItsParent) {
    // A forked copy of this test spawns a child, reports its pid and dies without cleaning up:
    // PR_SET_PDEATHSIG must kill the orphan.
    int report[2];
    ASSERT_EQ(pipe(report), 0);
    pid_t middle = fork();
    ASSERT_GE(middle, 0);
    if (middle == 0) {
        close(report[0]);
        auto child = ChildProcess::spawn({.name = "orphan",
                                          .binary = "/bin/sh",
                                          .args = {"-c", "echo ready >&3; exec sleep 1000"}});
        if (!child || !(*child)->wait_ready(kHangGuard)) _exit(1);
        pid_t pid = (*child)->pid();
        if (write(report[1], &pid, sizeof pid) != sizeof pid) _exit(1);
        _exit(0);  // no destructors: the child is left to the kernel
    }
    close(report[1]);
    pid_t orphan = 0;
    ASSERT_EQ(read(report[0], &orphan, sizeof orphan), static_cast<ssize_t>(sizeof orphan));
    close(report[0]);
    int orphan_fd = static_cast<int>(syscall(SYS_pidfd_open, orphan, 0));
    int status = 0;
    ASSERT_EQ(waitpid(middle, &status, 0), middle);
    EXPECT_EQ(WEXITSTATUS(status), 0);
    if (orphan_fd >= 0) {  // already gone otherwise
        pollfd fd{orphan_fd, POLLIN, 0};
        EXPECT_EQ(poll(&fd, 1, static_cast<int>(kHangGuard.count())), 1) << "the orphan survived";
        close(orphan_fd);
    }
}

// --- Supervisor ------------------------------------------------------------------------------

struct Exit {
    std::string name;
    ExitStatus status;
};

// Collects on_exit calls; waiters block on a condition variable, never on sleeps.
class Exits {
  public:
    Supervisor::ExitCallback callback() {
        return [this](const std::string& name, const ExitStatus& status) {
            std::lock_guard lock(mutex_);
            exits_.push_back({name, status});
            changed_.notify_all();
        };
    }
    // Waits until `count` exits were reported.
    std::vector<Exit> wait_for(std::size_t count) {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, kHangGuard, [&] { return exits_.size() >= count; });
        return exits_;
    }
    std::vector<Exit> all() {
        std::lock_guard lock(mutex_);
        return exits_;
    }

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Exit> exits_;
};

TEST_F(ChildProcessTest, SupervisorReportsAKilledChild) {
    Exits exits;
    auto supervisor = Supervisor::create(exits.callback());
    ASSERT_TRUE(supervisor.has_value());
    auto child = spawn_sh("victim", "echo ready >&3; exec sleep 1000");
    ASSERT_TRUE(child->wait_ready(kHangGuard).has_value());
    ASSERT_TRUE((*supervisor)->watch(child.get()).has_value());
    child->kill_now();
    auto reported = exits.wait_for(1);
    ASSERT_EQ(reported.size(), 1u);
    EXPECT_EQ(reported[0].name, "victim");
    EXPECT_FALSE(reported[0].status.exited);
    EXPECT_EQ(reported[0].status.signal, SIGKILL);
    // The supervisor reaped it; the owner sees the same status.
    ASSERT_TRUE(child->poll_exit().has_value());
    EXPECT_EQ(child->poll_exit()->signal, SIGKILL);
    (*supervisor)->unwatch(child.get());
    supervisor->reset();
    EXPECT_EQ(exits.all().size(), 1u);
}

TEST_F(ChildProcessTest, SupervisorReportsOnlyWatchedChildrenOnce) {
    Exits exits;
    auto supervisor = std::move(*Supervisor::create(exits.callback()));
    auto early = spawn_sh("early", "exit 5");  // may exit before it is watched: still reported
    auto unwatched = spawn_sh("unwatched", "echo ready >&3; exec sleep 1000");
    auto last = spawn_sh("last", "echo ready >&3; exec sleep 1000");
    ASSERT_TRUE(unwatched->wait_ready(kHangGuard).has_value());
    ASSERT_TRUE(last->wait_ready(kHangGuard).has_value());
    for (auto* child : {early.get(), unwatched.get(), last.get()}) {
        ASSERT_TRUE(supervisor->watch(child).has_value());
    }
    auto again = supervisor->watch(last.get());
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code, ErrorCode::already_exists);
    EXPECT_EQ(supervisor->watch(nullptr).error().code, ErrorCode::invalid_argument);
    ASSERT_EQ(exits.wait_for(1).size(), 1u);
    supervisor->unwatch(unwatched.get());
    unwatched->kill_now();
    // The owner reaps `last` itself; the supervisor still reports it, once.
    ExitStatus status = last->terminate(kHangGuard);
    auto reported = exits.wait_for(2);
    ASSERT_EQ(reported.size(), 2u);
    EXPECT_EQ(reported[0].name, "early");
    EXPECT_TRUE(reported[0].status.exited);
    EXPECT_EQ(reported[0].status.code, 5);
    EXPECT_EQ(reported[1].name, "last");
    EXPECT_EQ(reported[1].status.signal, status.signal);
    supervisor->stop();
    supervisor->stop();  // idempotent
    EXPECT_EQ(supervisor->watch(last.get()).error().code, ErrorCode::failed_precondition);
    EXPECT_EQ(exits.all().size(), 2u);
    unwatched->terminate(kHangGuard);
}

TEST_F(ChildProcessTest, SupervisorCallbackMayUnwatchAndStopWithoutDeadlock) {
    std::promise<void> called;
    Supervisor* raw = nullptr;
    ChildProcess* other = nullptr;
    auto supervisor = std::move(*Supervisor::create([&](const std::string&, const ExitStatus&) {
        raw->unwatch(other);
        raw->stop();
        called.set_value();
    }));
    raw = supervisor.get();
    auto dying = spawn_sh("dying", "exit 0");
    auto staying = spawn_sh("staying", "echo ready >&3; exec sleep 1000");
    other = staying.get();
    ASSERT_TRUE(supervisor->watch(staying.get()).has_value());
    ASSERT_TRUE(supervisor->watch(dying.get()).has_value());
    ASSERT_EQ(called.get_future().wait_for(kHangGuard), std::future_status::ready);
    supervisor.reset();
}

TEST_F(ChildProcessTest, SupervisorRejectsAnEmptyCallback) {
    auto supervisor = Supervisor::create(nullptr);
    ASSERT_FALSE(supervisor.has_value());
    EXPECT_EQ(supervisor.error().code, ErrorCode::invalid_argument);
}

TEST(ExitStatusText, Forms) {
    EXPECT_EQ((ExitStatus{.exited = true, .code = 0}).to_string(), "exited with code 0");
    EXPECT_EQ((ExitStatus{.signal = 9}).to_string(), "killed by signal 9 (Killed)");
    EXPECT_EQ(ExitStatus{}.to_string(), "ended with an unknown status");
}

}  // namespace
}  // namespace omnirt::runner

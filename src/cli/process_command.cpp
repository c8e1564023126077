#include "cli/process_command.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "config/plugins.h"
#include "config/runtime_plan.h"
#include "core/registry.h"
#include "runner/builtins.h"
#include "runner/plan_codec.h"
#if defined(OMNIRT_HAVE_STAGE_HOST)
#include "pipeline/stage_host.h"
#endif
#if defined(OMNIRT_HAVE_C10D_RELAY)
#include "relay/gloo/c10d_relay.h"
#endif

namespace omnirt::cli {
namespace {

constexpr int kReadyFd = 3;

// The write end of the ready pipe, when the runner gave us one as fd 3 (a FIFO). Run by hand,
// fd 3 is closed or something else, and nothing is written.
class ReadyPipe {
  public:
    ReadyPipe() {
        struct stat info {};
        if (fstat(kReadyFd, &info) == 0 && S_ISFIFO(info.st_mode)) {
            fd_ = kReadyFd;
            fcntl(fd_, F_SETFD, FD_CLOEXEC);  // nothing this process starts may inherit it
        }
    }
    ReadyPipe(const ReadyPipe&) = delete;
    ReadyPipe& operator=(const ReadyPipe&) = delete;
    ~ReadyPipe() { close_pipe(); }

    // Writes one line and closes the pipe; later calls do nothing.
    void report(std::string line) {
        if (fd_ < 0) return;
        for (char& c : line) {
            if (c == '\n' || c == '\r') c = ' ';
        }
        line += '\n';
        std::size_t written = 0;
        while (written < line.size()) {
            ssize_t n = write(fd_, line.data() + written, line.size() - written);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;  // the parent is gone or stopped listening
            written += static_cast<std::size_t>(n);
        }
        close_pipe();
    }

  private:
    void close_pipe() {
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
    }
    int fd_ = -1;
};

// SIGTERM and SIGINT, blocked in every thread (the mask is set before any other thread starts,
// and threads inherit it) and read from a signalfd by one watcher thread, which asks the stage
// host to stop. A signal before the host exists is remembered and applied when it is set.
class StopSignals {
  public:
    static sigset_t stop_signals() {
        sigset_t signals;
        sigemptyset(&signals);
        sigaddset(&signals, SIGTERM);
        sigaddset(&signals, SIGINT);
        return signals;
    }

    // Blocks them in the calling thread; call before any other thread starts.
    static Status block() {
        sigset_t signals = stop_signals();
        if (int error = pthread_sigmask(SIG_BLOCK, &signals, nullptr); error != 0) {
            return fail(ErrorCode::internal,
                        std::string("pthread_sigmask: ") + std::strerror(error));
        }
        return ok_status();
    }

    // Starts the watcher thread (blocks the signals first, in case block() was not called).
    static Result<std::unique_ptr<StopSignals>> create() {
        OMNI_RETURN_IF_ERROR(block());
        sigset_t signals = stop_signals();
        auto watcher = std::unique_ptr<StopSignals>(new StopSignals());
        watcher->signal_fd_ = signalfd(-1, &signals, SFD_CLOEXEC);
        watcher->wake_fd_ = eventfd(0, EFD_CLOEXEC);
        if (watcher->signal_fd_ < 0 || watcher->wake_fd_ < 0) {
            return fail(ErrorCode::resource_exhausted,
                        std::string("signalfd / eventfd: ") + std::strerror(errno));
        }
        StopSignals* raw = watcher.get();
        watcher->thread_ = std::thread([raw] { raw->run(); });
        return watcher;
    }

    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;
    ~StopSignals() {
        if (thread_.joinable()) {
            std::uint64_t one = 1;
            ssize_t ignored = write(wake_fd_, &one, sizeof one);
            (void)ignored;
            thread_.join();
        }
        if (signal_fd_ >= 0) close(signal_fd_);
        if (wake_fd_ >= 0) close(wake_fd_);
    }

    // `stop` runs on the watcher thread for each stop signal; empty to detach. Any thread.
    void set_target(std::function<void()> stop) {
        std::lock_guard lock(mutex_);
        stop_ = std::move(stop);
        if (received_ && stop_) stop_();
    }

  private:
    StopSignals() = default;

    void run() {
        pthread_setname_np(pthread_self(), "omnirt-signals");
        while (true) {
            pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
            if (poll(fds, 2, -1) < 0) continue;  // EINTR
            if (fds[1].revents != 0) return;
            signalfd_siginfo info{};
            if (read(signal_fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
            spdlog::info("received {}, stopping", sigabbrev_np(static_cast<int>(info.ssi_signo)));
            std::lock_guard lock(mutex_);
            received_ = true;
            if (stop_) stop_();
        }
    }

    int signal_fd_ = -1;
    int wake_fd_ = -1;
    std::thread thread_;
    std::mutex mutex_;
    std::function<void()> stop_;
    bool received_ = false;
};

// Everything before the stages run: the plan, its environment and plugins, the registries.
Result<std::shared_ptr<const config::RuntimePlan>> prepare(const std::string& plan_path,
                                                           const std::string& process_name) {
    OMNI_TRY(auto plan, runner::read_plan_file(plan_path));
    if (plan.find_process(process_name) == nullptr) {
        std::string known;
        for (const auto& p : plan.processes) known += (known.empty() ? "" : ", ") + p.name;
        return fail(ErrorCode::not_found,
                    "the plan has no process '" + process_name + "' (processes: " + known + ")");
    }
    // Before any thread starts: setenv is not thread-safe. Values already set win.
    for (const auto& [name, value] : plan.env_defaults) {
        if (setenv(name.c_str(), value.c_str(), 0) != 0) {
            return fail(ErrorCode::invalid_argument,
                        "env_defaults: cannot set '" + name + "': " + std::strerror(errno));
        }
    }
    OMNI_RETURN_IF_ERROR(config::load_plugins(plan.plugins, Registry::global()));
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
#if defined(OMNIRT_HAVE_C10D_RELAY)
    if (auto status = relay::register_c10d_backends(); !status) {
        return fail(status.error().with_context("registering the c10d relay backends"));
    }
#endif
    return std::make_shared<const config::RuntimePlan>(std::move(plan));
}

}  // namespace

int run_stage_process(const std::string& plan_path, const std::string& process_name) {
    // Logs go to stderr, named after the process; stdout stays free.
    spdlog::set_default_logger(
        spdlog::stderr_color_mt(process_name.empty() ? "stage-process" : process_name));
    // A parent that stopped reading must not kill us with SIGPIPE (pipes and sockets report EPIPE).
    signal(SIGPIPE, SIG_IGN);
    ReadyPipe ready;
    auto failed = [&ready](const Error& error) {
        spdlog::error("{}", error.message);
        ready.report("error: " + error.to_string());
        return 1;
    };

    // Blocked before anything (a plugin, a library) can start a thread that would inherit an
    // unblocked mask and take a SIGTERM with the default action.
    if (auto blocked = StopSignals::block(); !blocked) return failed(blocked.error());
    auto plan = prepare(plan_path, process_name);
    if (!plan) return failed(plan.error());
    auto signals = StopSignals::create();
    if (!signals) return failed(signals.error());
#if defined(OMNIRT_HAVE_STAGE_HOST)
    auto host = pipeline::StageHost::create(*plan, process_name);
    if (!host) return failed(host.error());
    pipeline::StageHost* raw_host = host->get();
    (*signals)->set_target([raw_host] { raw_host->request_stop(); });
    if (auto started = (*host)->start(); !started) {
        (*signals)->set_target({});
        (*host)->stop();
        return failed(started.error());
    }
    spdlog::info("ready: stages of process '{}' running", process_name);
    ready.report("ready");
    (*host)->wait_for_shutdown();
    (*signals)->set_target({});
    (*host)->stop();
    spdlog::info("stopped");
    return 0;
#else
    return failed(Error{ErrorCode::unimplemented, "this omnirt was built without the stage host"});
#endif
}

void add_stage_process_command(CLI::App& app, int& exit_code) {
    struct Args {
        std::string plan;
        std::string process;
    };
    auto args = std::make_shared<Args>();
    CLI::App* command = app.add_subcommand("stage-process", "");  // internal: no help entry
    command->group("");
    command->add_option("--plan", args->plan)->required();
    command->add_option("--process", args->process)->required();
    command->callback(
        [args, &exit_code] { exit_code = run_stage_process(args->plan, args->process); });
}

}  // namespace omnirt::cli

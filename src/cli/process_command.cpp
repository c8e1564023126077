#include "cli/process_command.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
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
#include "pipeline/stage_host.h"
#include "runner/builtins.h"
#include "runner/plan_codec.h"

namespace omnirt::cli {
namespace {

constexpr int kReadyFd = 3;
// The parent reads at most 4096 bytes per ready line (runner/child_process.cpp).
constexpr std::size_t kMaxReadyLine = 4000;

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
        if (line.size() > kMaxReadyLine) line = line.substr(0, kMaxReadyLine) + "...";
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

// The write end of the stop-signal pipe. Set once, before the handlers are installed, and never
// closed: the handlers may run at any time until the process exits.
int stop_signal_pipe = -1;

extern "C" void on_stop_signal(int signal_number) {
    int saved_errno = errno;
    auto byte = static_cast<unsigned char>(signal_number);
    ssize_t ignored = write(stop_signal_pipe, &byte, 1);  // async-signal-safe; full pipe: dropped
    (void)ignored;
    errno = saved_errno;
}

// SIGTERM stops the stage host. SIGINT is ignored: a terminal's Ctrl-C reaches the whole process
// group, and the parent owns an orderly shutdown (`omnirt serve` drains its responses first, then
// sends every stage the shutdown message); a stage that stopped at once would fail the requests
// being drained. The parent's death still ends a stage (PR_SET_PDEATHSIG). Blocking them and
// calling sigwait is not enough here: libraries start threads before main (their static
// initialisers), with the signals unblocked, so the kernel may deliver a SIGTERM to one of those
// and kill the process. A handler works whichever thread takes the signal: it writes the signal
// number to a pipe that one watcher thread polls and turns into host->request_stop(). A signal
// before the host exists is remembered and applied when the host is set.
class StopSignals {
  public:
    // Installs the handlers (once per process) and starts the watcher thread.
    static Result<std::unique_ptr<StopSignals>> create() {
        auto watcher = std::unique_ptr<StopSignals>(new StopSignals());
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
            return fail(ErrorCode::resource_exhausted,
                        std::string("pipe: ") + std::strerror(errno));
        }
        watcher->signal_fd_ = fds[0];
        stop_signal_pipe = fds[1];
        watcher->wake_fd_ = eventfd(0, EFD_CLOEXEC);
        if (watcher->wake_fd_ < 0) {
            return fail(ErrorCode::resource_exhausted,
                        std::string("eventfd: ") + std::strerror(errno));
        }
        struct sigaction action {};
        action.sa_handler = on_stop_signal;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        if (sigaction(SIGTERM, &action, nullptr) != 0) {
            return fail(ErrorCode::internal, std::string("sigaction: ") + std::strerror(errno));
        }
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        sigemptyset(&ignore.sa_mask);
        if (sigaction(SIGINT, &ignore, nullptr) != 0) {
            return fail(ErrorCode::internal, std::string("sigaction: ") + std::strerror(errno));
        }
        StopSignals* raw = watcher.get();
        watcher->thread_ = std::thread([raw] { raw->run(); });
        return watcher;
    }

    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;
    // Joins the watcher. The handlers stay: a late signal is written to the pipe and ignored.
    ~StopSignals() {
        if (thread_.joinable()) {
            std::uint64_t one = 1;
            ssize_t ignored = write(wake_fd_, &one, sizeof one);
            (void)ignored;
            thread_.join();
        }
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
            unsigned char signal_number = 0;
            if (read(signal_fd_, &signal_number, 1) != 1) continue;
            spdlog::info("received SIG{}, stopping", sigabbrev_np(signal_number));
            std::lock_guard lock(mutex_);
            received_ = true;
            if (stop_) stop_();
        }
    }

    int signal_fd_ = -1;  // read end of the stop-signal pipe (kept open with the write end)
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
    // Before the stages start their threads (setenv races with getenv). Values already set win.
    for (const auto& [name, value] : plan.env_defaults) {
        if (setenv(name.c_str(), value.c_str(), 0) != 0) {
            return fail(ErrorCode::invalid_argument,
                        "env_defaults: cannot set '" + name + "': " + std::strerror(errno));
        }
    }
    OMNI_RETURN_IF_ERROR(config::load_plugins(plan.plugins, Registry::global()));
    // The gloo / nccl relay backends are not registered here: the first create_relay for them
    // loads their libtorch-based plugin (relay/c10d_loader.h).
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    return std::make_shared<const config::RuntimePlan>(std::move(plan));
}

}  // namespace

int run_stage_process(const std::string& plan_path, const std::string& process_name,
                      const pipeline::StageHostOptions& options) {
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

    // Handlers first: a SIGTERM while the plan and plugins load then still ends in a clean stop.
    auto signals = StopSignals::create();
    if (!signals) return failed(signals.error());
    auto plan = prepare(plan_path, process_name);
    if (!plan) return failed(plan.error());
    auto host = pipeline::StageHost::create(*plan, process_name, options);
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
}

void add_stage_process_command(CLI::App& app, int& exit_code) {
    struct Args {
        std::string plan;
        std::string process;
        std::int64_t heartbeat_ms = 1000;
        std::int64_t relay_timeout_ms = 60000;
    };
    auto args = std::make_shared<Args>();
    CLI::App* command = app.add_subcommand("stage-process", "");  // internal: no help entry
    command->group("");
    command->add_option("--plan", args->plan)->required();
    command->add_option("--process", args->process)->required();
    command->add_option("--heartbeat-ms", args->heartbeat_ms)->check(CLI::PositiveNumber);
    command->add_option("--relay-timeout-ms", args->relay_timeout_ms)->check(CLI::PositiveNumber);
    command->callback([args, &exit_code] {
        exit_code = run_stage_process(
            args->plan, args->process,
            {.relay_timeout = std::chrono::milliseconds(args->relay_timeout_ms),
             .heartbeat_interval = std::chrono::milliseconds(args->heartbeat_ms)});
    });
}

}  // namespace omnirt::cli

// Supervisor: one thread polls the watched children's pidfds plus an eventfd that wakes it when
// the watch set changes or stop() is called. A readable pidfd means the child exited: the thread
// reaps it (ChildProcess::State::reap is thread-safe, and whoever reaps first caches the status
// for the other) and calls on_exit once.
//
// unwatch() waits while the thread is handling that very child, so after it returns the thread
// never touches the child again; called from on_exit itself (the supervisor thread) it does not
// wait.
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "runner/child_process.h"
#include "runner/child_process_internal.h"

namespace omnirt::runner {

struct Supervisor::State {
    ExitCallback on_exit;
    int wake_fd = -1;
    std::thread thread;

    std::mutex mutex;
    std::condition_variable idle;
    std::vector<ChildProcess*> watched;
    ChildProcess* handling = nullptr;  // the child the thread is reaping / reporting right now
    bool stopping = false;

    ~State() {
        if (wake_fd >= 0) close(wake_fd);
    }

    void wake() const {
        std::uint64_t one = 1;
        ssize_t ignored = write(wake_fd, &one, sizeof one);
        (void)ignored;
    }

    void run() {
        pthread_setname_np(pthread_self(), "omnirt-superv");
        std::vector<pollfd> fds;
        std::vector<ChildProcess*> polled;
        while (true) {
            fds.assign(1, pollfd{wake_fd, POLLIN, 0});
            {
                // Read the pidfds under the lock: an unwatched child may be destroyed any time.
                std::lock_guard lock(mutex);
                if (stopping) return;
                polled = watched;
                for (ChildProcess* child : polled) fds.push_back(pollfd{child->pidfd(), POLLIN, 0});
            }
            if (poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
            if (fds[0].revents != 0) {
                std::uint64_t count = 0;
                ssize_t ignored = read(wake_fd, &count, sizeof count);
                (void)ignored;
            }
            for (std::size_t i = 0; i < polled.size(); ++i) {
                if (fds[i + 1].revents != 0) handle_exit(polled[i]);
            }
        }
    }

    void handle_exit(ChildProcess* child) {
        {
            std::lock_guard lock(mutex);
            // Unwatched since the poll started: leave it alone. (Should a new child have been
            // watched at the same address, poll_exit below just finds it still running.)
            if (stopping || std::find(watched.begin(), watched.end(), child) == watched.end()) {
                return;
            }
            handling = child;
        }
        std::optional<ExitStatus> status = child->poll_exit();
        {
            std::lock_guard lock(mutex);
            if (status) std::erase(watched, child);
        }
        if (status) on_exit(child->name(), *status);
        {
            std::lock_guard lock(mutex);
            handling = nullptr;
        }
        idle.notify_all();
    }
};

Supervisor::Supervisor(std::unique_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<Supervisor>> Supervisor::create(ExitCallback on_exit) {
    if (!on_exit) return fail(ErrorCode::invalid_argument, "supervisor: on_exit is empty");
    auto state = std::make_unique<State>();
    state->on_exit = std::move(on_exit);
    state->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (state->wake_fd < 0) {
        return fail(ErrorCode::resource_exhausted, errno_message("eventfd", errno));
    }
    State* raw = state.get();
    state->thread = std::thread([raw] { raw->run(); });
    return std::unique_ptr<Supervisor>(new Supervisor(std::move(state)));
}

Supervisor::~Supervisor() { stop(); }

Status Supervisor::watch(ChildProcess* child) {
    if (child == nullptr) return fail(ErrorCode::invalid_argument, "supervisor: null child");
    {
        std::lock_guard lock(state_->mutex);
        if (state_->stopping) {
            return fail(ErrorCode::failed_precondition, "supervisor: stopped");
        }
        if (std::find(state_->watched.begin(), state_->watched.end(), child) !=
            state_->watched.end()) {
            return fail(ErrorCode::already_exists,
                        "supervisor: process '" + child->name() + "' is already watched");
        }
        state_->watched.push_back(child);
    }
    state_->wake();
    return ok_status();
}

void Supervisor::unwatch(ChildProcess* child) {
    std::unique_lock lock(state_->mutex);
    std::erase(state_->watched, child);
    if (std::this_thread::get_id() != state_->thread.get_id()) {
        state_->idle.wait(lock, [&] { return state_->handling != child; });
    }
    lock.unlock();
    state_->wake();
}

void Supervisor::stop() {
    {
        std::lock_guard lock(state_->mutex);
        state_->stopping = true;
    }
    state_->wake();
    if (state_->thread.joinable() && std::this_thread::get_id() != state_->thread.get_id()) {
        state_->thread.join();
    }
}

}  // namespace omnirt::runner

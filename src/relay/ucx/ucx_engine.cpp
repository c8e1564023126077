// The engine's loop: task queue, wake-up, progress, shutdown. Transfers are in
// ucx_engine_transfers.cpp.
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>

#include "relay/ucx/ucx_engine_internal.h"

namespace omnirt::relay::ucx {
namespace {

// While endpoints exist the loop wakes at least this often, so UCX's keepalive can run.
constexpr int kKeepaliveTickMs = 1000;
// How long close() lets endpoints flush and reads finish before it gives up on them.
constexpr auto kCloseGrace = std::chrono::milliseconds(1000);

Status errno_error(const char* what) {
    return fail(ErrorCode::internal,
                std::string("ucx relay: ") + what + ": " + std::strerror(errno));
}

}  // namespace

Engine::Engine(std::shared_ptr<Context> context, std::unique_ptr<Worker> worker,
               FileDescriptor wake_fd, FileDescriptor epoll_fd)
    : context_(std::move(context)),
      worker_(std::move(worker)),
      address_(worker_->address()),
      wake_fd_(std::move(wake_fd)),
      epoll_fd_(std::move(epoll_fd)) {}

Engine::~Engine() { stop(); }

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<Context> context,
                                               const std::string& name) {
    OMNI_TRY(auto worker, Worker::create(context, name));
    FileDescriptor wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake_fd.valid()) return fail(errno_error("eventfd").error());
    FileDescriptor epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_fd.valid()) return fail(errno_error("epoll_create1").error());
    for (int fd : {worker->event_fd(), wake_fd.get()}) {
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.fd = fd;
        if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
            return fail(errno_error("epoll_ctl").error());
        }
    }
    std::unique_ptr<Engine> engine(
        new Engine(std::move(context), std::move(worker), std::move(wake_fd), std::move(epoll_fd)));
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    handler.id = kCompletionMessageId;
    handler.cb = &Engine::on_completion_message;
    handler.arg = engine.get();
    handler.flags = UCP_AM_FLAG_WHOLE_MSG;
    ucs_status_t status = ucp_worker_set_am_recv_handler(engine->worker_->get(), &handler);
    if (status != UCS_OK) {
        return fail(ucx_error(ErrorCode::internal,
                              "ucx relay: cannot install the completion message handler", status));
    }
    engine->thread_ = std::thread([raw = engine.get()] { raw->run(); });
    engine->loop_thread_id_ = engine->thread_.get_id();  // read by other threads; never changes
    return engine;
}

const std::vector<std::uint8_t>& Engine::worker_address() const { return address_; }

void Engine::wake() const {
    std::uint64_t one = 1;
    [[maybe_unused]] auto written = ::write(wake_fd_.get(), &one, sizeof one);
}

Status Engine::post(Task task) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return fail(ErrorCode::failed_precondition, "ucx relay is closed");
        tasks_.push_back(std::move(task));
    }
    wake();
    return {};
}

Status Engine::call(std::function<Status()> task) {
    OMNI_CHECK(std::this_thread::get_id() != loop_thread_id_,
               "ucx relay: a blocking call on the progress thread would deadlock");
    std::promise<Status> promise;
    auto future = promise.get_future();
    OMNI_RETURN_IF_ERROR(post([&] { promise.set_value(task()); }));
    // Every queued task runs: the loop drains the queue before it exits.
    return future.get();
}

Status Engine::publish(OutgoingTransfer transfer) {
    return post([this, transfer = std::move(transfer)]() mutable {
        auto id = transfer.id;
        outgoing_.insert_or_assign(id, std::move(transfer));
    });
}

Status Engine::start_read(IncomingRead read) {
    return call([&] { return issue_read(std::move(read)); });
}

void Engine::cleanup(const std::string& request_id) {
    // After stop() everything was aborted already; nothing to do.
    (void)call([&] {
        abort_request(request_id, "cleanup('" + request_id + "') ran");
        return ok_status();
    });
}

void Engine::stop() {
    std::lock_guard stop_lock(stop_mutex_);
    if (!thread_.joinable()) return;
    OMNI_CHECK(std::this_thread::get_id() != loop_thread_id_,
               "ucx relay: close() called on its own progress thread");
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake();
    thread_.join();
    // shut_down() closed every endpoint; reads UCX never completed (a dead peer behind an
    // endpoint without error handling) keep their destinations until the worker is gone.
    worker_.reset();
    retained_.clear();
    reads_.clear();
    finished_reads_.clear();
}

void Engine::run() {
    for (;;) {
        bool busy = false;
        while (ucp_worker_progress(worker_->get()) != 0) busy = true;
        // Tasks before events: a completion message is matched only after the task that
        // published its transfer (queued before the metadata left this process) has run.
        busy |= run_tasks();
        busy |= handle_events();
        {
            std::lock_guard lock(mutex_);
            if (stopping_ && tasks_.empty()) break;
        }
        if (!busy) wait_for_events();
    }
    shut_down();
}

bool Engine::run_tasks() {
    std::deque<Task> tasks;
    {
        std::lock_guard lock(mutex_);
        tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    return !tasks.empty();
}

void Engine::wait_for_events() {
    ucs_status_t status = ucp_worker_arm(worker_->get());
    if (status == UCS_ERR_BUSY) return;  // events arrived meanwhile: progress again
    int timeout_ms =
        peers_.empty() && retired_peers_.empty() && reads_.empty() ? -1 : kKeepaliveTickMs;
    if (status != UCS_OK) {
        // Cannot arm (should not happen): degrade to a coarse tick rather than spin.
        spdlog::error("ucx relay: ucp_worker_arm failed: {}", ucs_status_string(status));
        timeout_ms = 10;
    }
    epoll_event events[2];
    int ready = ::epoll_wait(epoll_fd_.get(), events, 2, timeout_ms);
    if (ready < 0 && errno != EINTR)
        spdlog::error("ucx relay: epoll_wait: {}", std::strerror(errno));
    std::uint64_t count = 0;
    [[maybe_unused]] auto drained = ::read(wake_fd_.get(), &count, sizeof count);
}

void Engine::shut_down() {
    const std::string reason = "the ucx relay was closed";
    // Their memory stays mapped until the worker is gone: UCX may still serve a late read.
    for (auto& [id, transfer] : outgoing_) {
        transfer.done->set(fail(ErrorCode::aborted, reason));
        retained_.push_back(std::move(transfer));
    }
    outgoing_.clear();
    for (auto& [id, read] : reads_) read->read.done->set(fail(ErrorCode::aborted, reason));
    for (auto& [key, peer] : peers_) {
        peer->retired = true;
        retired_peers_.push_back(std::move(peer));
    }
    peers_.clear();

    // Let reads finish (forced PEER endpoints cancel theirs) and endpoints close, for a while.
    std::vector<ucs_status_ptr_t> closing;
    auto close_idle_peers = [&] {
        std::erase_if(retired_peers_, [&](const std::unique_ptr<Peer>& peer) {
            if (peer->reads_in_flight > 0) return false;
            peer->close_endpoints(closing);
            return true;
        });
    };
    auto all_closed = [&] {
        return std::all_of(closing.begin(), closing.end(), [](ucs_status_ptr_t request) {
            return ucp_request_check_status(request) != UCS_INPROGRESS;
        });
    };
    auto deadline = std::chrono::steady_clock::now() + kCloseGrace;
    close_idle_peers();
    while ((!retired_peers_.empty() || !all_closed()) &&
           std::chrono::steady_clock::now() < deadline) {
        if (ucp_worker_progress(worker_->get()) == 0) {
            handle_events();
            close_idle_peers();
            if (ucp_worker_arm(worker_->get()) == UCS_OK) {
                epoll_event events[2];
                (void)::epoll_wait(epoll_fd_.get(), events, 2, 10);
            }
        }
    }
    handle_events();
    // Reads still in flight after the grace period: their keys stay unreleased (UCX may still
    // refer to them; close_endpoints leaks them) and their endpoints are closed anyway.
    for (auto& peer : retired_peers_) peer->close_endpoints(closing);
    retired_peers_.clear();
    for (ucs_status_ptr_t request : closing) ucp_request_free(request);
    if (!reads_.empty()) {
        spdlog::warn(
            "ucx relay: {} read(s) from dead senders never completed; released with the "
            "worker",
            reads_.size());
    }
}

}  // namespace omnirt::relay::ucx

#include "control/control_plane.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "control/ports.h"

namespace omnirt::control {
namespace {

struct Inbound {
    zmq::socket_t socket;
    ControlPlane::Handler handler;
    std::string endpoint;
};

struct Outbound {
    zmq::socket_t socket;
    std::deque<std::vector<std::uint8_t>> pending;  // kept in order while the socket is full
};

// One message for the IO thread; an empty endpoint means "publish".
struct Outgoing {
    std::string endpoint;
    std::vector<std::uint8_t> bytes;
};

}  // namespace

struct ControlPlane::State {
    ControlOptions options;
    zmq::context_t context{1};
    std::vector<Inbound> inbound;
    std::optional<zmq::socket_t> publisher;
    std::deque<std::vector<std::uint8_t>> publish_pending;
    std::map<std::string, Outbound> outbound;
    ControlStats stats;
    std::vector<std::string> bound_ipc_paths;  // removed on stop

    std::mutex mutex;
    std::condition_variable not_full;
    std::condition_variable subscribers_changed;
    std::deque<Outgoing> queue;
    std::size_t subscribers = 0;
    std::atomic<std::size_t> subscriptions_received{0};
    bool started = false;
    bool stopping = false;
    bool stopped = false;
    std::chrono::steady_clock::time_point stop_deadline;

    int wake_fd = -1;
    std::thread io_thread;
    std::thread::id io_thread_id;
    // True while the IO thread is (about to be) blocked in zmq_poll with nothing queued: the
    // first sender then writes the eventfd and clears it. A busy IO thread needs no wake-up (it
    // sends what is queued before it polls again). Guarded by `mutex`.
    bool io_waiting = false;

    ~State() {
        if (wake_fd >= 0) ::close(wake_fd);
    }

    void wake() const {
        std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
    }

    Status enqueue(Outgoing item) {
        std::unique_lock lock(mutex);
        if (stopping || stopped) {
            return fail(ErrorCode::failed_precondition, "control plane is stopped");
        }
        // The IO thread itself must never block on its own queue.
        const bool on_io_thread = std::this_thread::get_id() == io_thread_id;
        if (!on_io_thread) {
            not_full.wait(lock,
                          [&] { return queue.size() < options.send_queue_capacity || stopping; });
            if (stopping) return fail(ErrorCode::failed_precondition, "control plane is stopped");
        }
        queue.push_back(std::move(item));
        const bool wake_up = io_waiting;
        io_waiting = false;
        lock.unlock();
        if (wake_up) wake();
        return {};
    }

    // Sends (or keeps pending) everything queued so far. IO thread, awake.
    void dispatch_queued() {
        std::deque<Outgoing> batch;
        {
            std::lock_guard lock(mutex);
            io_waiting = false;
            if (queue.empty()) return;
            batch.swap(queue);
        }
        not_full.notify_all();
        for (auto& item : batch) dispatch(std::move(item));
    }

    Outbound& outbound_for(const std::string& endpoint) {
        auto it = outbound.find(endpoint);
        if (it != outbound.end()) return it->second;
        zmq::socket_t socket(context, zmq::socket_type::push);
        socket.set(zmq::sockopt::linger, 0);
        socket.set(zmq::sockopt::sndhwm, 0);  // flow control is the bounded send queue's job
        try {
            socket.connect(endpoint);
        } catch (const zmq::error_t& e) {
            spdlog::error("control: cannot connect to {}: {}", endpoint, e.what());
        }
        return outbound.emplace(endpoint, Outbound{std::move(socket), {}}).first->second;
    }

    // True when sent; false when the socket is full (keep it pending).
    static bool try_send(zmq::socket_t& socket, const std::vector<std::uint8_t>& bytes) {
        try {
            auto result = socket.send(zmq::const_buffer(bytes.data(), bytes.size()),
                                      zmq::send_flags::dontwait);
            return result.has_value();
        } catch (const zmq::error_t& e) {
            spdlog::error("control: send failed: {}", e.what());
            return true;  // dropped: a broken socket must not wedge the queue
        }
    }

    void dispatch(Outgoing item) {
        if (item.endpoint.empty()) {
            if (!publisher) return;
            if (publish_pending.empty() && try_send(*publisher, item.bytes)) {
                stats.published++;
            } else {
                publish_pending.push_back(std::move(item.bytes));
            }
            return;
        }
        Outbound& out = outbound_for(item.endpoint);
        if (out.pending.empty() && try_send(out.socket, item.bytes)) {
            stats.sent++;
        } else {
            out.pending.push_back(std::move(item.bytes));
        }
    }

    void flush(zmq::socket_t& socket, std::deque<std::vector<std::uint8_t>>& pending,
               std::atomic<std::uint64_t>& counter) {
        while (!pending.empty() && try_send(socket, pending.front())) {
            pending.pop_front();
            counter++;
        }
    }

    void receive_all(Inbound& in) {
        for (int batch = 0; batch < 256; ++batch) {
            zmq::message_t message;
            zmq::recv_result_t got;
            try {
                got = in.socket.recv(message, zmq::recv_flags::dontwait);
            } catch (const zmq::error_t& e) {
                spdlog::error("control: receive on {} failed: {}", in.endpoint, e.what());
                return;
            }
            if (!got) return;
            if (message.size() > options.max_message_bytes) {
                stats.dropped_oversized++;
                spdlog::warn("control: dropped a {}-byte message on {} (limit {} bytes)",
                             message.size(), in.endpoint, options.max_message_bytes);
                continue;
            }
            auto decoded = proto::decode_message(
                {static_cast<const std::uint8_t*>(message.data()), message.size()},
                options.decode_limits);
            if (!decoded) {
                stats.dropped_malformed++;
                spdlog::warn("control: dropped a malformed message on {}: {}", in.endpoint,
                             decoded.error().message);
                continue;
            }
            stats.received++;
            in.handler(std::move(*decoded));
        }
    }

    void read_subscriptions() {
        for (;;) {
            zmq::message_t message;
            auto got = publisher->recv(message, zmq::recv_flags::dontwait);
            if (!got) return;
            if (message.size() == 0) continue;
            auto kind = static_cast<const std::uint8_t*>(message.data())[0];
            std::lock_guard lock(mutex);
            if (kind == 1) {
                subscribers++;
                subscriptions_received.fetch_add(1);
            } else if (kind == 0 && subscribers > 0) {
                subscribers--;
            }
            subscribers_changed.notify_all();
        }
    }

    bool all_flushed() const {
        if (!publish_pending.empty()) return false;
        for (const auto& [endpoint, out] : outbound) {
            if (!out.pending.empty()) return false;
        }
        return true;
    }

    void run() {
        {
            std::lock_guard lock(mutex);
            io_thread_id = std::this_thread::get_id();
        }
        std::vector<zmq_pollitem_t> items;
        std::vector<std::deque<std::vector<std::uint8_t>>*> item_pending;
        for (;;) {
            items.clear();
            items.push_back({nullptr, wake_fd, ZMQ_POLLIN, 0});
            for (auto& in : inbound) items.push_back({in.socket.handle(), 0, ZMQ_POLLIN, 0});
            std::size_t publisher_index = items.size();
            if (publisher) {
                short events = ZMQ_POLLIN | (publish_pending.empty() ? 0 : ZMQ_POLLOUT);
                items.push_back({publisher->handle(), 0, events, 0});
            }
            std::size_t outbound_begin = items.size();
            item_pending.clear();
            for (auto& [endpoint, out] : outbound) {
                if (out.pending.empty()) continue;
                items.push_back({out.socket.handle(), 0, ZMQ_POLLOUT, 0});
                item_pending.push_back(&out.pending);
            }

            long timeout = -1;
            bool finishing = false;
            {
                std::lock_guard lock(mutex);
                if (stopping) {
                    finishing = true;
                    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        stop_deadline - std::chrono::steady_clock::now());
                    if ((queue.empty() && all_flushed()) || left.count() <= 0) break;
                    timeout = std::max<long>(1, std::min<long>(left.count(), 10));
                }
                if (!queue.empty()) {
                    timeout = 0;  // queued while this thread was busy: no wake-up came for it
                } else {
                    io_waiting = true;
                }
            }
            int ready = zmq_poll(items.data(), static_cast<int>(items.size()), timeout);
            if (ready < 0 && zmq_errno() != EINTR) {
                spdlog::error("control: poll failed: {}", zmq_strerror(zmq_errno()));
                break;
            }
            if (items[0].revents & ZMQ_POLLIN) {
                std::uint64_t count;
                [[maybe_unused]] auto n = ::read(wake_fd, &count, sizeof count);
            }
            dispatch_queued();
            for (std::size_t i = 0; i < inbound.size(); ++i) {
                if (items[1 + i].revents & ZMQ_POLLIN && !finishing) receive_all(inbound[i]);
            }
            dispatch_queued();  // what the handlers sent
            if (publisher) {
                if (items[publisher_index].revents & ZMQ_POLLIN) read_subscriptions();
                flush(*publisher, publish_pending, stats.published);
            }
            for (std::size_t i = 0; i < item_pending.size(); ++i) {
                if (!(items[outbound_begin + i].revents & ZMQ_POLLOUT)) continue;
                for (auto& [endpoint, out] : outbound) {
                    if (&out.pending == item_pending[i]) flush(out.socket, out.pending, stats.sent);
                }
            }
        }
        // What ZMQ still holds in its pipes gets the rest of the stop linger to reach the wire.
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            stop_deadline - std::chrono::steady_clock::now());
        int linger = static_cast<int>(std::max<long>(0, left.count()));
        for (auto& [endpoint, out] : outbound) out.socket.set(zmq::sockopt::linger, linger);
        if (publisher) publisher->set(zmq::sockopt::linger, linger);
        inbound.clear();
        outbound.clear();
        publisher.reset();
    }
};

Result<std::unique_ptr<ControlPlane>> ControlPlane::create(ControlOptions options) {
    auto state = std::make_unique<State>();
    state->options = options;
    state->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (state->wake_fd < 0) {
        return fail(ErrorCode::unavailable, "control plane: eventfd failed");
    }
    return std::unique_ptr<ControlPlane>(new ControlPlane(std::move(state)));
}

ControlPlane::ControlPlane(std::unique_ptr<State> state) : state_(std::move(state)) {}

ControlPlane::~ControlPlane() { stop(Duration(0)); }

namespace {

Result<std::string> bind_socket(zmq::socket_t& socket, const std::string& endpoint,
                                std::vector<std::string>& bound_ipc_paths) {
    try {
        socket.bind(endpoint);
    } catch (const zmq::error_t& e) {
        std::string message = "cannot bind " + endpoint + ": " + e.what();
        if (e.num() == EADDRINUSE) {
            const std::string hint = ephemeral_port_hint(endpoint, ephemeral_port_range());
            if (!hint.empty()) message += " (" + hint + ")";
        }
        return fail(ErrorCode::unavailable, message);
    }
    constexpr std::string_view kIpc = "ipc://";
    if (endpoint.starts_with(kIpc)) bound_ipc_paths.push_back(endpoint.substr(kIpc.size()));
    return socket.get(zmq::sockopt::last_endpoint);
}

}  // namespace

Result<std::string> ControlPlane::bind_pull(const std::string& endpoint, Handler handler) {
    if (state_->started) return fail(ErrorCode::failed_precondition, "bind_pull after start");
    zmq::socket_t socket(state_->context, zmq::socket_type::pull);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(state_->options.hard_message_limit));
    OMNI_TRY(std::string bound, bind_socket(socket, endpoint, state_->bound_ipc_paths));
    state_->inbound.push_back(Inbound{std::move(socket), std::move(handler), bound});
    return bound;
}

Result<std::string> ControlPlane::bind_publisher(const std::string& endpoint) {
    if (state_->started) return fail(ErrorCode::failed_precondition, "bind_publisher after start");
    if (state_->publisher) return fail(ErrorCode::already_exists, "publisher already bound");
    zmq::socket_t socket(state_->context, zmq::socket_type::xpub);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::xpub_verbose, 1);  // count every subscriber, not every topic
    socket.set(zmq::sockopt::xpub_nodrop, 1);   // a full subscriber makes us wait, not drop
    socket.set(zmq::sockopt::sndhwm, 0);
    OMNI_TRY(std::string bound, bind_socket(socket, endpoint, state_->bound_ipc_paths));
    state_->publisher = std::move(socket);
    return bound;
}

Status ControlPlane::subscribe(const std::string& endpoint, Handler handler) {
    if (state_->started) return fail(ErrorCode::failed_precondition, "subscribe after start");
    zmq::socket_t socket(state_->context, zmq::socket_type::sub);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::rcvhwm, 0);
    socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(state_->options.hard_message_limit));
    socket.set(zmq::sockopt::subscribe, "");
    try {
        socket.connect(endpoint);
    } catch (const zmq::error_t& e) {
        return fail(ErrorCode::unavailable, "cannot connect to " + endpoint + ": " + e.what());
    }
    state_->inbound.push_back(Inbound{std::move(socket), std::move(handler), endpoint});
    return {};
}

Status ControlPlane::start() {
    std::lock_guard lock(state_->mutex);
    if (state_->started) return fail(ErrorCode::failed_precondition, "already started");
    state_->started = true;
    state_->io_thread = std::thread([state = state_.get()] { state->run(); });
    return {};
}

Status ControlPlane::send(const std::string& endpoint, const proto::ControlMessage& message) {
    OMNI_TRY(auto bytes, proto::encode_message(message));
    return send_bytes(endpoint, std::move(bytes));
}

Status ControlPlane::send_bytes(const std::string& endpoint, std::vector<std::uint8_t> bytes) {
    if (endpoint.empty()) return fail(ErrorCode::invalid_argument, "send: empty endpoint");
    return state_->enqueue(Outgoing{endpoint, std::move(bytes)});
}

Status ControlPlane::publish(const proto::ControlMessage& message) {
    if (!state_->publisher) return fail(ErrorCode::failed_precondition, "no publisher bound");
    OMNI_TRY(auto bytes, proto::encode_message(message));
    return state_->enqueue(Outgoing{std::string(), std::move(bytes)});
}

Status ControlPlane::wait_for_subscribers(std::size_t count, Duration timeout) {
    std::unique_lock lock(state_->mutex);
    bool reached = state_->subscribers_changed.wait_for(
        lock, timeout, [&] { return state_->subscribers >= count; });
    if (!reached) {
        return fail(ErrorCode::deadline_exceeded,
                    "only " + std::to_string(state_->subscribers) + " of " + std::to_string(count) +
                        " subscribers joined within " + std::to_string(timeout.count()) + " ms");
    }
    return {};
}

std::size_t ControlPlane::subscriptions_received() const {
    return state_->subscriptions_received.load();
}

std::size_t ControlPlane::subscriber_count() const {
    std::lock_guard lock(state_->mutex);
    return state_->subscribers;
}

void ControlPlane::stop(Duration linger) {
    {
        std::lock_guard lock(state_->mutex);
        if (state_->stopped) return;
        state_->stopping = true;
        state_->stop_deadline = std::chrono::steady_clock::now() + linger;
    }
    state_->not_full.notify_all();
    if (state_->io_thread.joinable()) {
        state_->wake();
        state_->io_thread.join();
    }
    std::lock_guard lock(state_->mutex);
    state_->stopped = true;
    state_->inbound.clear();
    state_->outbound.clear();
    state_->publisher.reset();
    // Terminating the context waits until ZMQ has really closed every socket (and removed the
    // ipc files of bound ones), so nothing is left behind when stop() returns.
    state_->context.close();
    for (const auto& path : state_->bound_ipc_paths) ::unlink(path.c_str());
}

const ControlStats& ControlPlane::stats() const { return state_->stats; }

}  // namespace omnirt::control

// HttpServer: the io_context, its threads, the accept loop, drain and stop.
#include "serve/http/http_server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <thread>
#include <vector>

#include "serve/http/connection.h"

namespace omnirt::serve::http {
namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

struct HttpServer::Impl {
    // Declared first: destroyed last, after everything that refers to it.
    detail::ServerShared shared;
    std::unique_ptr<asio::io_context> io;
    std::unique_ptr<tcp::acceptor> acceptor;
    std::vector<std::thread> threads;
    std::uint16_t port = 0;
    bool started = false;

    asio::awaitable<void> accept_loop();
};

asio::awaitable<void> HttpServer::Impl::accept_loop() {
    for (;;) {
        error_code ec;
        tcp::socket socket = co_await acceptor->async_accept(
            asio::make_strand(*io), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            if (ec == asio::error::operation_aborted || !acceptor->is_open()) co_return;
            // Out of fds or a connection reset before accept: back off briefly, go on.
            asio::steady_timer backoff(acceptor->get_executor(), std::chrono::milliseconds(10));
            co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
        }
        if (shared.draining) co_return;
        auto executor = socket.get_executor();
        std::shared_ptr<detail::Connection> connection;
        {
            std::lock_guard lock(shared.mutex);
            if (shared.connections.size() >= shared.options.max_connections) {
                socket.close(ec);
                continue;
            }
            connection = std::make_shared<detail::Connection>(std::move(socket), shared);
            shared.connections.emplace(connection.get(), connection);
        }
        // The coroutine frame owns the connection (its parameter).
        asio::co_spawn(executor, connection->run(connection), asio::detached);
    }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::create(HttpServerOptions options) {
    if (options.threads < 1) return fail(ErrorCode::invalid_argument, "http: threads must be >= 1");
    if (options.max_connections < 1) {
        return fail(ErrorCode::invalid_argument, "http: max_connections must be >= 1");
    }
    if (options.max_header_bytes < 64) {
        return fail(ErrorCode::invalid_argument, "http: max_header_bytes must be >= 64");
    }
    if (options.read_timeout.count() <= 0 || options.idle_timeout.count() <= 0 ||
        options.write_timeout.count() <= 0) {
        return fail(ErrorCode::invalid_argument, "http: timeouts must be positive");
    }
    if (options.stream_stall_timeout.count() <= 0) {
        return fail(ErrorCode::invalid_argument, "http: stream_stall_timeout must be positive");
    }
    if (options.stream_low_water_bytes > options.stream_high_water_bytes ||
        options.stream_high_water_bytes > options.max_stream_buffer_bytes) {
        return fail(
            ErrorCode::invalid_argument,
            "http: stream buffer limits must be ordered: stream_low_water_bytes (" +
                std::to_string(options.stream_low_water_bytes) + ") <= stream_high_water_bytes (" +
                std::to_string(options.stream_high_water_bytes) + ") <= max_stream_buffer_bytes (" +
                std::to_string(options.max_stream_buffer_bytes) + ")");
    }
    auto impl = std::make_unique<Impl>();
    impl->io = std::make_unique<asio::io_context>(options.threads);
    error_code ec;
    auto address =
        asio::ip::make_address(options.host == "localhost" ? "127.0.0.1" : options.host, ec);
    if (ec) {
        return fail(ErrorCode::invalid_argument,
                    "http: host '" + options.host + "' is not an IP address");
    }
    tcp::endpoint endpoint(address, options.port);
    impl->acceptor = std::make_unique<tcp::acceptor>(asio::make_strand(*impl->io));
    impl->acceptor->open(endpoint.protocol(), ec);
    if (!ec) impl->acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) impl->acceptor->bind(endpoint, ec);
    if (!ec) impl->acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        return fail(ErrorCode::unavailable, "http: cannot listen on " + options.host + ":" +
                                                std::to_string(options.port) + ": " + ec.message());
    }
    impl->port = impl->acceptor->local_endpoint().port();
    impl->shared.options = std::move(options);
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Status HttpServer::add_route(std::string method, std::string path, HttpHandler handler) {
    if (impl_->started) return fail(ErrorCode::failed_precondition, "http: add_route after start");
    if (method.empty() || path.empty() || path[0] != '/' || !handler) {
        return fail(ErrorCode::invalid_argument,
                    "http: a route needs a method, a /path, a handler");
    }
    if (impl_->shared.websocket_routes.count(path) != 0) {
        return fail(ErrorCode::already_exists, "http: " + path + " is a WebSocket route");
    }
    auto& methods = impl_->shared.routes[path];
    if (!methods.emplace(method, std::move(handler)).second) {
        return fail(ErrorCode::already_exists, "http: route " + method + " " + path + " exists");
    }
    return ok_status();
}

Status HttpServer::add_websocket_route(
    std::string path, std::function<WebSocketAccept(std::shared_ptr<WebSocket>)> handler,
    const WebSocketOptions& options) {
    if (impl_->started) {
        return fail(ErrorCode::failed_precondition, "http: add_websocket_route after start");
    }
    if (path.empty() || path[0] != '/' || !handler) {
        return fail(ErrorCode::invalid_argument,
                    "http: a WebSocket route needs a /path, a handler");
    }
    if (options.max_message_bytes == 0 || options.max_queued_bytes == 0 ||
        options.idle_timeout.count() <= 0) {
        return fail(ErrorCode::invalid_argument,
                    "http: WebSocket limits and idle timeout must be positive");
    }
    auto& shared = impl_->shared;
    if (shared.routes.count(path) != 0 || shared.websocket_routes.count(path) != 0) {
        return fail(ErrorCode::already_exists, "http: route " + path + " exists");
    }
    shared.websocket_routes.emplace(
        std::move(path), detail::ServerShared::WebSocketRoute{std::move(handler), options});
    return ok_status();
}

Status HttpServer::start() {
    if (impl_->started) return fail(ErrorCode::failed_precondition, "http: already started");
    {
        std::lock_guard lock(impl_->shared.core->mutex);
        if (impl_->shared.core->stopped) {
            return fail(ErrorCode::failed_precondition, "http: server stopped");
        }
    }
    impl_->started = true;
    asio::co_spawn(impl_->acceptor->get_executor(), impl_->accept_loop(), asio::detached);
    for (int i = 0; i < impl_->shared.options.threads; ++i) {
        impl_->threads.emplace_back([io = impl_->io.get()] { io->run(); });
    }
    return ok_status();
}

std::uint16_t HttpServer::port() const { return impl_->port; }

std::size_t HttpServer::connection_count() const {
    std::lock_guard lock(impl_->shared.mutex);
    return impl_->shared.connections.size();
}

Status HttpServer::drain(std::chrono::milliseconds timeout) {
    auto& shared = impl_->shared;
    {
        std::lock_guard lock(shared.core->mutex);
        if (shared.core->stopped || !impl_->started) {
            stop();
            return ok_status();
        }
        shared.draining = true;
        asio::post(impl_->acceptor->get_executor(), [acceptor = impl_->acceptor.get()] {
            error_code ignored;
            acceptor->close(ignored);
        });
    }
    bool drained = false;
    {
        std::unique_lock lock(shared.mutex);
        for (auto& [raw, weak] : shared.connections) {
            if (auto connection = weak.lock()) connection->close_if_idle();
        }
        drained =
            shared.changed.wait_for(lock, timeout, [&] { return shared.connections.empty(); });
    }
    stop();
    if (!drained) {
        return fail(ErrorCode::deadline_exceeded, "http: connections still open after the drain");
    }
    return ok_status();
}

void HttpServer::stop() {
    if (!impl_->io) return;
    {
        std::lock_guard lock(impl_->shared.core->mutex);
        impl_->shared.core->stopped = true;
    }
    impl_->io->stop();
    for (auto& thread : impl_->threads) thread.join();
    impl_->threads.clear();
    std::vector<std::shared_ptr<detail::Connection>> open;
    {
        std::lock_guard lock(impl_->shared.mutex);
        for (auto& [raw, weak] : impl_->shared.connections) {
            if (auto connection = weak.lock()) open.push_back(std::move(connection));
        }
        impl_->shared.connections.clear();
    }
    for (auto& connection : open) connection->abort_after_stop();
    open.clear();
    impl_->acceptor.reset();
    // Destroying the io_context destroys the suspended coroutines, their connections and sockets.
    impl_->io.reset();
}

}  // namespace omnirt::serve::http

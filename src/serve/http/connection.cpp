// One HTTP/1.1 connection: request reading, routing, the exchange write loop, disconnects.
#include "serve/http/connection.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <cctype>
#include <exception>

#include "serve/http/wire.h"

namespace omnirt::serve::http::detail {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using boost::system::error_code;

namespace {

constexpr std::size_t kReadChunk = 16 * 1024;
// After refusing a request: how long, and how many bytes, the rest of it is read and dropped.
constexpr std::chrono::seconds kLingerTime{5};
constexpr std::size_t kLingerBytes = std::size_t{1} << 30;
constexpr int kWsAbnormal = 1006;

HttpRequest to_request(bhttp::request<bhttp::string_body>& message) {
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    auto question = request.target.find('?');
    request.path = request.target.substr(0, question);
    if (question != std::string::npos) request.query = request.target.substr(question + 1);
    for (const auto& field : message) {
        std::string name(field.name_string());
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        auto [it, inserted] = request.headers.emplace(name, std::string(field.value()));
        if (!inserted) it->second += ", " + std::string(field.value());
    }
    request.body = std::move(message.body());
    request.version = message.version();
    return request;
}

}  // namespace

std::string ServerShared::error_body(int status, std::string_view message) const {
    if (options.error_body) return options.error_body(status, message);
    return openai_error_body(status, message);
}

Connection::Connection(asio::ip::tcp::socket socket, ServerShared& server)
    : stream_(std::move(socket)),
      server_(server),
      signal_(stream_.get_executor()),
      stall_timer_(stream_.get_executor()) {}

void Connection::wake() { signal_.cancel(); }

void Connection::watch_stall(std::shared_ptr<ExchangeState> state) {
    asio::post(signal_.get_executor(), [self = shared_from_this(), state = std::move(state)]() {
        if (self->exchange_ != state) return;
        // A new pause restarts the timer (the wait of an earlier one ends cancelled).
        self->stall_timer_.expires_after(state->stall_timeout());
        self->stall_timer_.async_wait([self, state](error_code ec) {
            if (ec || self->exchange_ != state) return;
            if (state->stalled()) self->cut_stream();
        });
    });
}

void Connection::cut_stream() {
    peer_gone_ = true;
    output_.push_front(OutItem{OutItem::Kind::cut, 0, {}, {}, {}});
    error_code ignored;
    stream_.socket().cancel(ignored);  // a write blocked on the reader ends now
    wake();
}

void Connection::post_output(std::shared_ptr<ExchangeState> state, OutItem item) {
    asio::post(signal_.get_executor(),
               [self = shared_from_this(), state = std::move(state), item = std::move(item)]() {
                   if (self->exchange_ != state) return;  // a stale exchange
                   self->output_.push_back(std::move(item));
                   self->wake();
               });
}

void Connection::close_if_idle() {
    asio::post(signal_.get_executor(), [self = shared_from_this()]() {
        self->close_requested_ = true;
        if (self->websocket_) {
            (void)self->websocket_->request_close(kWsGoingAway, "the server is shutting down");
            return;
        }
        if (self->idle_) {
            error_code ignored;
            self->stream_.socket().cancel(ignored);
        }
    });
}

void Connection::abort_after_stop() {
    if (exchange_) exchange_->mark_disconnected();
    if (websocket_) websocket_->finish(kWsGoingAway, "the server stopped");
}

asio::awaitable<bool> Connection::write_all(std::string data) {
    error_code ec;
    stream_.expires_after(server_.options.write_timeout);
    co_await asio::async_write(stream_, asio::buffer(data),
                               asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec;
}

asio::awaitable<void> Connection::linger_close() {
    // The client may still be sending the request we refused. Closing with unread bytes makes
    // the kernel reset the connection, and a reset can destroy the answer before the client
    // reads it; so stop sending, then read and discard until the client closes (bounded in
    // time and bytes).
    error_code ec;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    if (ec) co_return;
    stream_.expires_after(kLingerTime);
    std::size_t discarded = 0;
    while (discarded < kLingerBytes) {
        buffer_.clear();
        std::size_t n = co_await stream_.async_read_some(
            buffer_.prepare(kReadChunk * 4), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) break;
        discarded += n;
    }
    buffer_.clear();
}

asio::awaitable<void> Connection::send_error(int status, std::string_view message) {
    co_await write_all(format_response(status, "application/json",
                                       server_.error_body(status, message), {}, false, false));
}

asio::awaitable<void> Connection::run(std::shared_ptr<Connection> self) {
    const auto& options = server_.options;
    bool first = true;
    for (;;) {
        error_code ec;
        if (buffer_.size() == 0) {
            // Waiting for a new request: the idle state drain may close.
            if (close_requested_ || server_.draining) break;
            idle_ = true;
            stream_.expires_after(first ? options.read_timeout : options.idle_timeout);
            std::size_t n = co_await stream_.async_read_some(
                buffer_.prepare(kReadChunk), asio::redirect_error(asio::use_awaitable, ec));
            idle_ = false;
            if (ec) break;
            buffer_.commit(n);
        }
        first = false;
        bhttp::request_parser<bhttp::string_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(
            std::min<std::size_t>(options.max_header_bytes, UINT32_MAX)));
        parser.body_limit(options.max_body_bytes);
        stream_.expires_after(options.read_timeout);
        co_await bhttp::async_read(stream_, buffer_, parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            bool answered = true;
            if (ec == bhttp::error::body_limit) {
                co_await send_error(413, "request body too large");
            } else if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
                co_await send_error(431, "request header fields too large");
            } else if (ec.category() ==
                           bhttp::make_error_code(bhttp::error::bad_target).category() &&
                       ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
                co_await send_error(400, "malformed request: " + ec.message());
            } else {
                answered = false;  // timeouts, resets, truncated requests: just close
            }
            if (answered) co_await linger_close();
            break;
        }
        bool keep_alive = parser.get().keep_alive();
        if (server_.websocket_routes.count(std::string(
                parser.get().target().substr(0, parser.get().target().find('?')))) != 0) {
            if (!co_await serve_websocket(parser.release(), keep_alive)) break;
            continue;
        }
        HttpRequest request = to_request(parser.get());
        if (!co_await serve_route(std::move(request), keep_alive)) break;
    }
    if (exchange_) exchange_->mark_disconnected();
    exchange_.reset();
    if (!websocket_) {  // an upgraded connection's socket moved to its session
        error_code ignored;
        stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
        stream_.socket().close(ignored);
    }
    {
        std::lock_guard lock(server_.mutex);
        server_.connections.erase(this);
    }
    server_.changed.notify_all();
}

asio::awaitable<bool> Connection::serve_route(HttpRequest request, bool keep_alive) {
    keep_alive = keep_alive && !server_.draining && !close_requested_;
    auto path = server_.routes.find(request.path);
    if (path == server_.routes.end() || path->second.find(request.method) == path->second.end()) {
        int status = path == server_.routes.end() ? 404 : 405;
        HttpHeaders extra;
        if (status == 405) {
            std::string allow;
            for (const auto& [method, handler] : path->second) {
                allow += (allow.empty() ? "" : ", ") + method;
            }
            extra["allow"] = allow;
        }
        std::string message = status == 404
                                  ? "no route for " + request.path
                                  : "method " + request.method + " not allowed on " + request.path;
        bool written = co_await write_all(
            format_response(status, "application/json", server_.error_body(status, message), extra,
                            keep_alive, request.version == 10));
        co_return written&& keep_alive;
    }
    const HttpHandler& handler = path->second.find(request.method)->second;
    bool http10 = request.version == 10;
    const HttpServerOptions& options = server_.options;
    exchange_ = std::make_shared<ExchangeState>(
        server_.core, std::weak_ptr<ExchangeChannel>(shared_from_this()),
        StreamLimits{.high_water = options.stream_high_water_bytes,
                     .low_water = options.stream_low_water_bytes,
                     .max_pending = options.max_stream_buffer_bytes,
                     .stall_timeout = options.stream_stall_timeout});
    {
        auto exchange = std::make_shared<HttpExchange>(exchange_, std::move(request));
        try {
            handler(exchange);
        } catch (const std::exception& e) {
            exchange->respond(500, "application/json",
                              server_.error_body(500, std::string("handler failed: ") + e.what()));
        } catch (...) {
            exchange->respond(500, "application/json", server_.error_body(500, "handler failed"));
        }
    }
    co_return co_await serve_exchange(keep_alive, http10);
}

asio::awaitable<bool> Connection::serve_websocket(UpgradeRequest message, bool keep_alive) {
    keep_alive = keep_alive && !server_.draining && !close_requested_;
    const bool http10 = message.version() == 10;
    HttpRequest request = to_request(message);
    const auto& route = server_.websocket_routes.find(request.path)->second;
    // Not an upgrade: an HTTP answer (GCC 12 wants these built outside the co_await).
    std::string refusal;
    if (request.method != "GET") {
        HttpHeaders allow;
        allow["allow"] = "GET";
        refusal = format_response(
            405, "application/json",
            server_.error_body(405, "method " + request.method + " not allowed on " + request.path),
            allow, keep_alive, http10);
    } else if (!websocket::is_upgrade(message)) {
        HttpHeaders upgrade;
        upgrade["upgrade"] = "websocket";
        refusal =
            format_response(426, "application/json",
                            server_.error_body(426, request.path + " is a WebSocket endpoint"),
                            upgrade, keep_alive, http10);
    }
    if (!refusal.empty()) {
        bool written = co_await write_all(std::move(refusal));
        co_return written&& keep_alive;
    }
    request.body.clear();
    auto state = std::make_shared<WebSocketState>(server_.core, route.options);
    WebSocketAccept accept;
    try {
        accept = route.handler(std::make_shared<WebSocket>(state, std::move(request)));
    } catch (const std::exception& e) {
        accept.refuse_status = 500;
        accept.refuse_message = std::string("handler failed: ") + e.what();
    } catch (...) {
        accept.refuse_status = 500;
        accept.refuse_message = "handler failed";
    }
    if (accept.refuse_status != 0) {
        state->finish(kWsAbnormal, "refused");
        HttpHeaders none;
        std::string answer =
            format_response(accept.refuse_status, "application/json",
                            server_.error_body(accept.refuse_status, accept.refuse_message), none,
                            keep_alive, http10);
        bool written = co_await write_all(std::move(answer));
        co_return written&& keep_alive;
    }
    auto session = std::make_shared<WebSocketSession>(std::move(stream_), state, route.options,
                                                      accept.subprotocol);
    state->attach(session, std::move(accept.callbacks));
    websocket_ = state;
    if (close_requested_ || server_.draining) {
        (void)state->request_close(kWsGoingAway, "the server is shutting down");
    }
    co_await session->run(session, std::move(message));
    co_return false;
}

asio::awaitable<void> Connection::watch(std::shared_ptr<Connection> self) {
    // Reads ahead (pipelined requests stay buffered) so that a closed socket is noticed.
    while (!stop_watching_ &&
           buffer_.size() < server_.options.max_header_bytes + server_.options.max_body_bytes) {
        error_code ec;
        std::size_t n = co_await stream_.async_read_some(
            buffer_.prepare(kReadChunk), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            if (!stop_watching_) {
                peer_gone_ = true;
                if (exchange_) exchange_->mark_disconnected();
            }
            break;
        }
        buffer_.commit(n);
    }
    watching_ = false;
    wake();
}

asio::awaitable<bool> Connection::serve_exchange(bool keep_alive, bool http10) {
    auto state = exchange_;
    stream_.expires_never();
    watching_ = true;
    stop_watching_ = false;
    asio::co_spawn(stream_.get_executor(), watch(shared_from_this()), asio::detached);
    bool ok = true;
    bool done = false;
    bool raw_stream = false;  // an HTTP/1.0 stream: no chunked framing, close at the end
    while (!done) {
        if (output_.empty()) {
            if (peer_gone_) {
                ok = false;
                break;
            }
            error_code ignored;
            signal_.expires_at(asio::steady_timer::time_point::max());
            co_await signal_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
            continue;
        }
        OutItem item = std::move(output_.front());
        output_.pop_front();
        std::size_t chunk_bytes = 0;
        // A drain (or close) that began while the handler ran makes this the last exchange.
        keep_alive = keep_alive && !server_.draining && !close_requested_;
        std::string data;
        switch (item.kind) {
            case OutItem::Kind::response:
                data = format_response(item.status, item.content_type, item.body, item.headers,
                                       keep_alive, http10);
                done = true;
                break;
            case OutItem::Kind::abandon:
                data = format_response(
                    500, "application/json",
                    server_.error_body(500, "the handler dropped the request unanswered"), {},
                    keep_alive, http10);
                done = true;
                break;
            case OutItem::Kind::stream_head:
                raw_stream = http10;
                if (raw_stream) keep_alive = false;
                data = format_stream_head(item.status, item.content_type, item.headers, keep_alive,
                                          http10);
                break;
            case OutItem::Kind::chunk:
                chunk_bytes = item.body.size();
                data = raw_stream ? std::move(item.body) : format_chunk(item.body);
                break;
            case OutItem::Kind::cut:
                peer_gone_ = true;
                ok = false;
                break;
            case OutItem::Kind::finish:
                data = raw_stream ? std::string() : std::string("0\r\n\r\n");
                done = true;
                break;
        }
        // The handler is done with the exchange once its last item is taken: a client that
        // closes as soon as it has read the answer is not a disconnect to report.
        if (done) state->mark_complete();
        if (!ok) break;  // cut
        if (!data.empty() && !co_await write_all(std::move(data))) {
            ok = false;
            break;
        }
        if (chunk_bytes != 0) state->written(chunk_bytes);
    }
    if (!done) state->mark_disconnected();
    exchange_.reset();
    output_.clear();
    stall_timer_.cancel();
    if (watching_) {
        stop_watching_ = true;
        error_code ignored;
        stream_.socket().cancel(ignored);
        while (watching_) {
            signal_.expires_at(asio::steady_timer::time_point::max());
            co_await signal_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        }
    }
    co_return ok&& keep_alive && !peer_gone_ && !close_requested_ && !server_.draining;
}

}  // namespace omnirt::serve::http::detail

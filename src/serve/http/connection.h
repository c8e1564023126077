#pragma once
// Internal: one HTTP/1.1 connection (Beast). Included only by this library's .cpp files.
#include <utility>  // before Boost's awaitable headers on GCC 12

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "serve/http/exchange_state.h"
#include "serve/http/websocket_session.h"

namespace omnirt::serve::http::detail {

class Connection;

// What connections share with the server. Lives as long as the io_context (the server's Impl).
struct ServerShared {
    HttpServerOptions options;
    std::map<std::string, std::map<std::string, HttpHandler>> routes;  // path -> method -> handler
    struct WebSocketRoute {
        WebSocketHandler handler;
        WebSocketOptions options;
    };
    std::map<std::string, WebSocketRoute> websocket_routes;  // path -> route (GET only)
    std::shared_ptr<ServerCore> core = std::make_shared<ServerCore>();
    std::atomic<bool> draining{false};

    std::mutex mutex;
    std::condition_variable changed;
    std::map<Connection*, std::weak_ptr<Connection>> connections;  // guarded by mutex

    [[nodiscard]] std::string error_body(int status, std::string_view message) const;
};

// Runs on its socket's strand: reads requests in order, hands each to its route, writes the
// answer, and keeps a read pending meanwhile to notice the client going away.
class Connection : public ExchangeChannel, public std::enable_shared_from_this<Connection> {
  public:
    Connection(boost::asio::ip::tcp::socket socket, ServerShared& server);

    // `self` (this connection) is kept alive by the coroutine frame.
    boost::asio::awaitable<void> run(std::shared_ptr<Connection> self);

    // Any thread (with ServerCore::mutex held): queue an item for the current exchange.
    void post_output(std::shared_ptr<ExchangeState> state, OutItem item) override;
    // Any thread (with ServerCore::mutex held): arms the stall timer of the current exchange.
    void watch_stall(std::shared_ptr<ExchangeState> state) override;
    // Any thread: close the connection if it waits for a new request; otherwise at the end of
    // the current exchange.
    void close_if_idle();
    // After the IO threads stopped: the unfinished exchange sees a disconnect.
    void abort_after_stop();

  private:
    boost::asio::awaitable<bool> serve_route(HttpRequest request, bool keep_alive);
    // A request on a WebSocket route: the upgrade (true: the connection is now done), or an
    // HTTP answer (426 without an upgrade, the handler's refusal).
    boost::asio::awaitable<bool> serve_websocket(UpgradeRequest message, bool keep_alive);
    boost::asio::awaitable<bool> serve_exchange(bool keep_alive, bool http10);
    boost::asio::awaitable<void> watch(std::shared_ptr<Connection> self);
    boost::asio::awaitable<bool> write_all(std::string data);
    boost::asio::awaitable<void> send_error(int status, std::string_view message);
    boost::asio::awaitable<void> linger_close();
    void wake();
    // The current stream stalled: the connection closes (its writes are cancelled).
    void cut_stream();

    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    ServerShared& server_;
    boost::asio::steady_timer signal_;       // cancelled to wake the run loop
    boost::asio::steady_timer stall_timer_;  // a paused stream's stall timeout
    // Strand-only state.
    std::deque<OutItem> output_;
    std::shared_ptr<ExchangeState> exchange_;
    std::shared_ptr<WebSocketState> websocket_;  // set once upgraded
    bool idle_ = false;
    bool close_requested_ = false;
    bool peer_gone_ = false;
    bool watching_ = false;
    bool stop_watching_ = false;
};

}  // namespace omnirt::serve::http::detail

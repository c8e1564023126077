#pragma once
// Internal: one accepted WebSocket connection (Beast). Included only by this library's .cpp
// files.
#include <utility>  // before Boost's awaitable headers on GCC 12

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <memory>

#include "serve/http/websocket_state.h"

namespace omnirt::serve::http::detail {

using UpgradeRequest = boost::beast::http::request<boost::beast::http::string_body>;

// Runs on its connection's strand: a read loop that delivers messages, and a write loop that
// sends the queued messages and the close.
class WebSocketSession : public WebSocketChannel,
                         public std::enable_shared_from_this<WebSocketSession> {
  public:
    WebSocketSession(boost::beast::tcp_stream stream, std::shared_ptr<WebSocketState> state,
                     const WebSocketOptions& options, std::string subprotocol);

    // Completes the handshake and serves the connection until it ends; then the state's
    // on_close has run. `self` is this session (kept alive by the coroutine frame).
    boost::asio::awaitable<void> run(std::shared_ptr<WebSocketSession> self,
                                     UpgradeRequest upgrade);
    void wake_writer() override;

  private:
    boost::asio::awaitable<void> read_loop(std::shared_ptr<WebSocketSession> self);
    boost::asio::awaitable<void> wait_signal();

    boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
    std::shared_ptr<WebSocketState> state_;
    const WebSocketOptions options_;
    const std::string subprotocol_;
    boost::asio::steady_timer signal_;
    // Strand-only state.
    bool reading_ = false;
    bool writing_ = false;
    bool oversize_ = false;  // the client sent a message over the limit
    int end_code_ = 1006;
    std::string end_reason_;
};

}  // namespace omnirt::serve::http::detail

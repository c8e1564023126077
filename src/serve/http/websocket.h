#pragma once
// WebSocket routes of the HTTP server (RFC 6455 through Beast, behind a Beast-free API; see
// docs/serve.md, "HTTP layer").
//
// A GET with `Upgrade: websocket` on a WebSocket route is handed to its handler, which accepts
// (returning the callbacks for the connection's messages) or refuses with an HTTP status. A
// plain GET on such a route is answered 426.
//
// Threads: on_message and on_close run on an IO thread, in order, one at a time per
// connection, and must not block. WebSocket's methods may be called from any thread.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "serve/http/http_server.h"

namespace omnirt::serve::http {

namespace detail {
class WebSocketState;
}

// Close codes the server uses itself (RFC 6455 section 7.4.1).
inline constexpr int kWsNormalClose = 1000;
inline constexpr int kWsGoingAway = 1001;        // the server drains or stops
inline constexpr int kWsPolicyViolation = 1008;  // the client does not read its messages
inline constexpr int kWsMessageTooBig = 1009;

// The server's side of one WebSocket connection. Every method is thread-safe; after the
// connection closed (either side, or the server stopped) they return false and do nothing.
class WebSocket {
  public:
    WebSocket(std::shared_ptr<detail::WebSocketState> state, HttpRequest request);
    ~WebSocket();
    WebSocket(const WebSocket&) = delete;
    WebSocket& operator=(const WebSocket&) = delete;

    // The upgrade request (its body is empty).
    [[nodiscard]] const HttpRequest& request() const { return request_; }

    // Queues one text message; messages go out in call order. When the messages queued and not
    // yet written exceed WebSocketOptions::max_queued_bytes (a client that does not read), the
    // connection is closed with 1008 and this returns false.
    bool send_text(std::string message);
    // Sends a close frame after the queued messages and ends the connection.
    bool close(int code = kWsNormalClose, std::string reason = {});
    [[nodiscard]] bool closed() const;

  private:
    std::shared_ptr<detail::WebSocketState> state_;
    HttpRequest request_;
};

struct WebSocketCallbacks {
    // One complete message (text or binary); `binary` tells which.
    std::function<void(std::string message, bool binary)> on_message;
    // Once, when the connection ended for any reason: the close code received or sent (1006 for
    // a connection lost without a close frame) and its reason.
    std::function<void(int code, std::string reason)> on_close;
};

// What a handler answers to an upgrade request: `refuse_status` 0 accepts with `callbacks`;
// otherwise the request is answered with that HTTP status and `refuse_message` (as the
// server's error body), and no WebSocket is opened.
struct WebSocketAccept {
    int refuse_status = 0;
    std::string refuse_message;
    WebSocketCallbacks callbacks;
    // The subprotocol chosen among those the client offered (Sec-WebSocket-Protocol); "" for
    // none. Browsers fail a handshake that offered some and got none back.
    std::string subprotocol;
};

using WebSocketHandler = std::function<WebSocketAccept(std::shared_ptr<WebSocket>)>;

struct WebSocketOptions {
    std::size_t max_message_bytes = 16u << 20;  // a larger incoming message closes with 1009
    std::size_t max_queued_bytes = 32u << 20;   // see WebSocket::send_text
    // A connection that receives nothing (not even a pong to the server's ping, sent at half
    // this time) for this long is closed.
    std::chrono::milliseconds idle_timeout{60000};
};

}  // namespace omnirt::serve::http

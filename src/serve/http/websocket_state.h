#pragma once
// Internal: the state a WebSocket handle shares with its connection's session (no Beast here).
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "serve/http/exchange_state.h"
#include "serve/http/websocket.h"

namespace omnirt::serve::http::detail {

// Implemented by the session: wakes its write loop on the connection's strand. Called with
// ServerCore::mutex held and the server not stopped.
class WebSocketChannel {
  public:
    virtual ~WebSocketChannel() = default;
    virtual void wake_writer() = 0;
};

// Thread-safe. The outgoing queue lives here (under mutex_); the session takes from it.
class WebSocketState {
  public:
    WebSocketState(std::shared_ptr<ServerCore> core, WebSocketOptions options)
        : core_(std::move(core)), options_(options) {}

    void attach(std::weak_ptr<WebSocketChannel> channel, WebSocketCallbacks callbacks);

    bool send_text(std::string message);
    bool request_close(int code, std::string reason);
    [[nodiscard]] bool closed() const;
    // True once the client stopped reading (send_text overflowed): the connection is cut rather
    // than closed, since a close frame could not reach it either.
    [[nodiscard]] bool cut() const;

    // Session side (its strand). Takes every queued message; `close_code` is set (non-zero) once
    // a close was requested, after the messages queued before it.
    struct Pending {
        std::deque<std::string> messages;
        int close_code = 0;
        std::string close_reason;
    };
    Pending take();
    void written(std::size_t bytes);  // bytes of taken messages now on the wire
    void deliver(std::string message, bool binary);
    // The connection ended: on_close runs once (on this thread); later calls do nothing.
    void finish(int code, std::string reason);

  private:
    bool wake();

    std::shared_ptr<ServerCore> core_;
    const WebSocketOptions options_;
    mutable std::mutex mutex_;
    std::weak_ptr<WebSocketChannel> channel_;  // guarded by mutex_
    WebSocketCallbacks callbacks_;   // on_message: session strand only; on_close under finish
    std::deque<std::string> queue_;  // guarded by mutex_
    std::size_t queued_bytes_ = 0;   // queued or being written; guarded by mutex_
    int close_code_ = 0;             // guarded by mutex_
    std::string close_reason_;       // guarded by mutex_
    bool closed_ = false;            // guarded by mutex_
    bool cut_ = false;               // guarded by mutex_
};

}  // namespace omnirt::serve::http::detail

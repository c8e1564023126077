// WebSocket and its shared state: the thread-safe half of a WebSocket connection.
#include "serve/http/websocket_state.h"

namespace omnirt::serve::http {
namespace detail {

void WebSocketState::attach(std::weak_ptr<WebSocketChannel> channel, WebSocketCallbacks callbacks) {
    std::lock_guard lock(mutex_);
    channel_ = std::move(channel);
    callbacks_ = std::move(callbacks);
}

bool WebSocketState::wake() {
    std::lock_guard core_lock(core_->mutex);
    if (core_->stopped) return false;
    if (auto channel = channel_.lock()) channel->wake_writer();
    return true;
}

bool WebSocketState::send_text(std::string message) {
    std::lock_guard lock(mutex_);
    if (closed_ || close_code_ != 0) return false;
    if (queued_bytes_ + message.size() > options_.max_queued_bytes) {
        // The client does not read: drop what is queued and close.
        queue_.clear();
        cut_ = true;
        close_code_ = kWsPolicyViolation;
        close_reason_ = "the client does not read its messages";
        wake();
        return false;
    }
    queued_bytes_ += message.size();
    queue_.push_back(std::move(message));
    return wake();
}

bool WebSocketState::request_close(int code, std::string reason) {
    std::lock_guard lock(mutex_);
    if (closed_ || close_code_ != 0) return false;
    close_code_ = code;
    close_reason_ = std::move(reason);
    return wake();
}

bool WebSocketState::closed() const {
    std::lock_guard lock(mutex_);
    return closed_ || close_code_ != 0;
}

bool WebSocketState::cut() const {
    std::lock_guard lock(mutex_);
    return cut_;
}

WebSocketState::Pending WebSocketState::take() {
    std::lock_guard lock(mutex_);
    Pending pending;
    pending.messages.swap(queue_);
    pending.close_code = close_code_;
    pending.close_reason = close_reason_;
    return pending;
}

void WebSocketState::written(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    queued_bytes_ -= std::min(bytes, queued_bytes_);
}

void WebSocketState::deliver(std::string message, bool binary) {
    if (callbacks_.on_message) callbacks_.on_message(std::move(message), binary);
}

void WebSocketState::finish(int code, std::string reason) {
    std::function<void(int, std::string)> on_close;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        queue_.clear();
        queued_bytes_ = 0;
        on_close = std::move(callbacks_.on_close);
        callbacks_ = {};
        channel_.reset();
    }
    if (on_close) on_close(code, std::move(reason));
}

}  // namespace detail

WebSocket::WebSocket(std::shared_ptr<detail::WebSocketState> state, HttpRequest request)
    : state_(std::move(state)), request_(std::move(request)) {}

WebSocket::~WebSocket() = default;

bool WebSocket::send_text(std::string message) { return state_->send_text(std::move(message)); }

bool WebSocket::close(int code, std::string reason) {
    return state_->request_close(code, std::move(reason));
}

bool WebSocket::closed() const { return state_->closed(); }

}  // namespace omnirt::serve::http

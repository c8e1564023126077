// HttpExchange and its shared state: the thread-safe half of a request/response.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "serve/http/exchange_state.h"

namespace omnirt::serve::http {
namespace detail {

bool ExchangeState::forward(OutItem item) {
    std::lock_guard core_lock(core_->mutex);
    if (core_->stopped) return false;
    auto channel = channel_.lock();
    if (!channel) return false;
    channel->post_output(shared_from_this(), std::move(item));
    return true;
}

bool ExchangeState::send(OutItem item) {
    bool now_paused = false;
    bool sent = false;
    {
        std::unique_lock lock(mutex_);
        if (disconnected_) return false;
        switch (item.kind) {
            case OutItem::Kind::response:
            case OutItem::Kind::stream_head:
                if (phase_ != Phase::fresh) return false;
                phase_ = item.kind == OutItem::Kind::response ? Phase::done : Phase::streaming;
                break;
            case OutItem::Kind::chunk:
                if (phase_ != Phase::streaming) return false;
                if (item.body.empty()) return true;
                if (pending_ + item.body.size() > limits_.max_pending) {
                    // A reader this far behind would make the server buffer without bound:
                    // cut the connection; the producer sees a disconnect and stops.
                    phase_ = Phase::done;
                    forward(OutItem{OutItem::Kind::cut, 0, {}, {}, {}});
                    lock.unlock();
                    mark_disconnected();
                    return false;
                }
                pending_ += item.body.size();
                if (!paused_ && pending_ > limits_.high_water) {
                    paused_ = true;
                    paused_since_ = std::chrono::steady_clock::now();
                    now_paused = true;
                }
                break;
            case OutItem::Kind::finish:
                if (phase_ != Phase::streaming) return false;
                phase_ = Phase::done;
                break;
            case OutItem::Kind::cut:
                return false;  // the server's own
            case OutItem::Kind::abandon:
                if (phase_ == Phase::done) return false;
                item.kind =
                    phase_ == Phase::streaming ? OutItem::Kind::finish : OutItem::Kind::abandon;
                phase_ = Phase::done;
                break;
        }
        // Forwarding under mutex_ keeps items in call order across threads.
        sent = forward(std::move(item));
    }
    if (now_paused) {
        {
            std::lock_guard core_lock(core_->mutex);
            auto channel = channel_.lock();
            if (!core_->stopped && channel) channel->watch_stall(shared_from_this());
        }
        report_flow();
    }
    return sent;
}

void ExchangeState::abandon() {
    OutItem item;
    item.kind = OutItem::Kind::abandon;
    send(std::move(item));
}

void ExchangeState::mark_disconnected() {
    std::vector<std::function<void()>> callbacks;
    {
        std::lock_guard lock(mutex_);
        if (disconnected_ || complete_) return;
        disconnected_ = true;
        callbacks.swap(callbacks_);
    }
    for (auto& callback : callbacks) callback();
}

void ExchangeState::mark_complete() {
    std::vector<std::function<void()>> callbacks;
    std::shared_ptr<std::function<void(StreamFlow)>> flow;
    std::lock_guard lock(mutex_);
    complete_ = true;
    callbacks.swap(callbacks_);  // destroyed after the unlock (declared first)
    flow.swap(flow_callback_);
}

void ExchangeState::written(std::size_t bytes) {
    {
        std::lock_guard lock(mutex_);
        pending_ -= std::min(bytes, pending_);
        if (!paused_ || stalled_ || pending_ > limits_.low_water) return;
        paused_ = false;
    }
    report_flow();
}

bool ExchangeState::stalled() {
    {
        std::lock_guard lock(mutex_);
        if (!paused_ || stalled_ || complete_ || disconnected_) return false;
        if (std::chrono::steady_clock::now() - paused_since_ < limits_.stall_timeout) return false;
        stalled_ = true;
    }
    report_flow();
    return true;
}

void ExchangeState::on_flow(std::function<void(StreamFlow)> callback) {
    std::lock_guard lock(mutex_);
    if (complete_) return;
    flow_callback_ = std::make_shared<std::function<void(StreamFlow)>>(std::move(callback));
}

void ExchangeState::report_flow() {
    std::lock_guard flow_lock(flow_mutex_);
    for (;;) {
        StreamFlow flow{};
        std::shared_ptr<std::function<void(StreamFlow)>> callback;
        {
            std::lock_guard lock(mutex_);
            if (reported_stalled_) return;
            if (stalled_) {
                if (!reported_paused_) {  // stalled always follows a reported pause
                    reported_paused_ = true;
                    flow = StreamFlow::paused;
                } else {
                    reported_stalled_ = true;
                    flow = StreamFlow::stalled;
                }
            } else if (paused_ != reported_paused_) {
                reported_paused_ = paused_;
                flow = paused_ ? StreamFlow::paused : StreamFlow::resumed;
            } else {
                return;
            }
            callback = flow_callback_;
        }
        if (callback && *callback) (*callback)(flow);
    }
}

void ExchangeState::on_disconnect(std::function<void()> callback) {
    {
        std::lock_guard lock(mutex_);
        if (complete_) return;
        if (!disconnected_) {
            callbacks_.push_back(std::move(callback));
            return;
        }
    }
    callback();
}

bool ExchangeState::disconnected() const {
    std::lock_guard lock(mutex_);
    return disconnected_;
}

}  // namespace detail

HttpExchange::HttpExchange(std::shared_ptr<detail::ExchangeState> state, HttpRequest request)
    : state_(std::move(state)), request_(std::move(request)) {}

HttpExchange::~HttpExchange() { state_->abandon(); }

bool HttpExchange::respond(int status, std::string_view content_type, std::string body,
                           HttpHeaders extra) {
    detail::OutItem item{detail::OutItem::Kind::response, status, std::string(content_type),
                         std::move(body), std::move(extra)};
    return state_->send(std::move(item));
}

bool HttpExchange::start_stream(int status, std::string_view content_type, HttpHeaders extra) {
    detail::OutItem item{detail::OutItem::Kind::stream_head,
                         status,
                         std::string(content_type),
                         {},
                         std::move(extra)};
    return state_->send(std::move(item));
}

bool HttpExchange::write(std::string chunk) {
    detail::OutItem item{detail::OutItem::Kind::chunk, 0, {}, std::move(chunk), {}};
    return state_->send(std::move(item));
}

bool HttpExchange::finish() {
    detail::OutItem item{detail::OutItem::Kind::finish, 0, {}, {}, {}};
    return state_->send(std::move(item));
}

void HttpExchange::on_disconnect(std::function<void()> callback) {
    state_->on_disconnect(std::move(callback));
}

bool HttpExchange::disconnected() const { return state_->disconnected(); }

void HttpExchange::on_flow(std::function<void(StreamFlow)> callback) {
    state_->on_flow(std::move(callback));
}

std::string_view to_string(StreamFlow flow) {
    switch (flow) {
        case StreamFlow::paused:
            return "paused";
        case StreamFlow::resumed:
            return "resumed";
        case StreamFlow::stalled:
            return "stalled";
    }
    return "unknown";
}

std::string openai_error_body(int status, std::string_view message) {
    const char* type = status >= 500 ? "server_error" : "invalid_request_error";
    nlohmann::json body = {{"error",
                            {{"message", std::string(message)},
                             {"type", type},
                             {"param", nullptr},
                             {"code", status}}}};
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace omnirt::serve::http

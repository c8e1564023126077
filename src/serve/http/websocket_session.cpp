// One WebSocket connection: the handshake, the read loop, the write loop, the close.
#include "serve/http/websocket_session.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/error.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <exception>
#include <vector>

namespace omnirt::serve::http::detail {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using boost::system::error_code;

namespace {
constexpr std::chrono::seconds kHandshakeTimeout{30};
constexpr int kWsInternalError = 1011;
constexpr int kWsAbnormal = 1006;
constexpr std::size_t kReadPiece = 64 * 1024;
}  // namespace

WebSocketSession::WebSocketSession(beast::tcp_stream stream, std::shared_ptr<WebSocketState> state,
                                   const WebSocketOptions& options, std::string subprotocol)
    : ws_(std::move(stream)),
      state_(std::move(state)),
      options_(options),
      subprotocol_(std::move(subprotocol)),
      signal_(ws_.get_executor()) {}

void WebSocketSession::wake_writer() {
    asio::post(ws_.get_executor(), [self = shared_from_this()] {
        self->signal_.cancel();
        // A client that stopped reading can block a write forever: cut the connection.
        if (self->writing_ && self->state_->cut()) {
            error_code ignored;
            beast::get_lowest_layer(self->ws_).socket().close(ignored);
        }
    });
}

asio::awaitable<void> WebSocketSession::wait_signal() {
    error_code ignored;
    signal_.expires_at(asio::steady_timer::time_point::max());
    co_await signal_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

asio::awaitable<void> WebSocketSession::read_loop(std::shared_ptr<WebSocketSession> self) {
    // Messages are assembled here, piece by piece, so that an oversize one is refused with a
    // close handshake (Beast's own limit tears the connection down, and the reset can destroy
    // the close frame before the client reads it).
    std::string message;
    for (;;) {
        beast::flat_buffer buffer;
        error_code ec;
        co_await ws_.async_read_some(buffer, kReadPiece,
                                     asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            if (ec == websocket::error::closed && end_code_ == kWsAbnormal) {
                end_code_ = ws_.reason().code;
                end_reason_ = std::string(ws_.reason().reason.c_str());
            }
            break;
        }
        message += beast::buffers_to_string(buffer.data());
        if (message.size() > options_.max_message_bytes) {
            oversize_ = true;
            break;
        }
        if (!ws_.is_message_done()) continue;
        try {
            state_->deliver(std::move(message), !ws_.got_text());
        } catch (const std::exception& e) {
            (void)state_->request_close(kWsInternalError, e.what());
        } catch (...) {
            (void)state_->request_close(kWsInternalError, "handler failed");
        }
        message.clear();
    }
    reading_ = false;
    signal_.cancel();
}

asio::awaitable<void> WebSocketSession::run(std::shared_ptr<WebSocketSession> self,
                                            UpgradeRequest upgrade) {
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout timeout{};
    timeout.handshake_timeout = kHandshakeTimeout;
    timeout.idle_timeout = options_.idle_timeout;
    timeout.keep_alive_pings = true;
    ws_.set_option(timeout);
    ws_.read_message_max(0);  // read_loop applies the limit
    ws_.auto_fragment(false);
    ws_.set_option(websocket::stream_base::decorator(
        [protocol = subprotocol_](websocket::response_type& response) {
            response.set(boost::beast::http::field::server, "omnirt");
            if (!protocol.empty()) {
                response.set(boost::beast::http::field::sec_websocket_protocol, protocol);
            }
        }));
    error_code ec;
    co_await ws_.async_accept(upgrade, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
        state_->finish(kWsAbnormal, "handshake failed: " + ec.message());
        co_return;
    }
    reading_ = true;
    asio::co_spawn(ws_.get_executor(), read_loop(self), asio::detached);
    bool sent_close = false;
    while (reading_ && !sent_close) {
        auto pending = state_->take();
        for (auto& message : pending.messages) {
            if (!reading_ || state_->cut()) break;
            writing_ = true;
            ws_.text(true);
            co_await ws_.async_write(asio::buffer(message),
                                     asio::redirect_error(asio::use_awaitable, ec));
            writing_ = false;
            state_->written(message.size());
            if (ec) break;
        }
        if (ec || !reading_) break;
        if (pending.close_code != 0) {
            end_code_ = pending.close_code;
            end_reason_ = pending.close_reason;
            if (state_->cut()) break;
            websocket::close_reason reason(static_cast<websocket::close_code>(pending.close_code),
                                           pending.close_reason);
            co_await ws_.async_close(reason, asio::redirect_error(asio::use_awaitable, ec));
            sent_close = true;
            break;
        }
        if (pending.messages.empty()) co_await wait_signal();
    }
    if (oversize_ && !sent_close) {
        // Refused; Beast's close reads and drops the rest until the client's close frame.
        end_code_ = websocket::close_code::too_big;
        end_reason_ = "message too big";
        websocket::close_reason reason(websocket::close_code::too_big, end_reason_);
        co_await ws_.async_close(reason, asio::redirect_error(asio::use_awaitable, ec));
        sent_close = true;
    }
    // Wait for the read loop: after our close frame it ends with the client's answer (or the
    // handshake timeout); otherwise cut the socket so that it ends now.
    if (reading_ && !sent_close) {
        error_code ignored;
        beast::get_lowest_layer(ws_).socket().close(ignored);
    }
    while (reading_) co_await wait_signal();
    error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    if (state_->cut()) {
        end_code_ = kWsPolicyViolation;
        end_reason_ = "the client does not read its messages";
    }
    state_->finish(end_code_, end_reason_);
}

}  // namespace omnirt::serve::http::detail

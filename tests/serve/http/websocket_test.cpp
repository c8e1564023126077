// WebSocket routes: echo, refusals, the 426 answer, oversize messages, server-side close, a
// client that never reads, drain and stop with open connections; nothing leaks.
#include <utility>  // before Boost's headers on GCC 12

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "serve/http/http_server.h"
#include "serve/http/test_client.h"
#include "serve/http/websocket.h"
#include "support/threads.h"

namespace omnirt::serve::http {
namespace {
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using boost::system::error_code;

constexpr auto kGuard = 30s;  // hang guard, never a synchronisation sleep

// What the server side saw, for the test thread to wait on.
struct Seen {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::string> messages;
    std::vector<std::pair<int, std::string>> closes;
    std::vector<std::shared_ptr<WebSocket>> sockets;

    void add_close(int code, std::string reason) {
        std::lock_guard lock(mutex);
        closes.emplace_back(code, std::move(reason));
        changed.notify_all();
    }
    template <class Pred>
    bool wait(Pred pred) {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, kGuard, pred);
    }
};

// A blocking Beast client with a hang guard on the socket.
class WsClient {
  public:
    explicit WsClient(std::uint16_t port, std::string target = "/ws") : ws_(io_) {
        asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
        ws_.next_layer().connect(endpoint);
        timeval guard{30, 0};
        ::setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &guard,
                     sizeof(guard));
        ws_.handshake("127.0.0.1", target, handshake_error_);
    }
    [[nodiscard]] const error_code& handshake_error() const { return handshake_error_; }
    void send(const std::string& text) { ws_.write(asio::buffer(text)); }
    // The next message, or the error that ended the connection.
    std::pair<std::string, error_code> read() {
        beast::flat_buffer buffer;
        error_code ec;
        ws_.read(buffer, ec);
        return {beast::buffers_to_string(buffer.data()), ec};
    }
    [[nodiscard]] websocket::close_reason reason() const { return ws_.reason(); }
    void close() {
        error_code ignored;
        ws_.close(websocket::close_code::normal, ignored);
    }
    websocket::stream<asio::ip::tcp::socket>& stream() { return ws_; }

  private:
    asio::io_context io_;
    websocket::stream<asio::ip::tcp::socket> ws_;
    error_code handshake_error_;
};

class WebSocketTest : public ::testing::Test {
  protected:
    void SetUp() override {
        fds_before_ = testing::open_fds();
        threads_before_ = testing::thread_count();
    }
    void TearDown() override {
        server_.reset();
        {
            std::lock_guard lock(seen_.mutex);
            seen_.sockets.clear();
        }
        EXPECT_EQ(testing::open_fds(), fds_before_) << "fds leaked";
        EXPECT_TRUE(omnirt::testing::thread_count_settles_to(threads_before_)) << "threads leaked";
    }
    // An echo route that keeps its sockets in seen_ (refusing when `refuse` is set).
    void start(WebSocketOptions options = {}, int refuse = 0) {
        auto server = HttpServer::create({});
        ASSERT_TRUE(server.has_value()) << server.error().to_string();
        server_ = std::move(*server);
        Seen* seen = &seen_;
        auto added = server_->add_websocket_route(
            "/ws",
            [seen, refuse](std::shared_ptr<WebSocket> socket) {
                WebSocketAccept accept;
                if (refuse != 0) {
                    accept.refuse_status = refuse;
                    accept.refuse_message = "not you";
                    return accept;
                }
                std::weak_ptr<WebSocket> weak = socket;
                accept.callbacks.on_message = [seen, weak](std::string message, bool) {
                    {
                        std::lock_guard lock(seen->mutex);
                        seen->messages.push_back(message);
                        seen->changed.notify_all();
                    }
                    if (auto socket = weak.lock()) socket->send_text("echo:" + message);
                };
                accept.callbacks.on_close = [seen](int code, std::string reason) {
                    seen->add_close(code, std::move(reason));
                };
                std::lock_guard lock(seen->mutex);
                seen->sockets.push_back(std::move(socket));
                seen->changed.notify_all();
                return accept;
            },
            options);
        ASSERT_TRUE(added.has_value()) << added.error().to_string();
        ASSERT_TRUE(server_->start().has_value());
    }

    Seen seen_;
    std::unique_ptr<HttpServer> server_;
    int fds_before_ = 0;
    int threads_before_ = 0;
};

TEST_F(WebSocketTest, EchoesInOrderAndReportsTheClientsClose) {
    start();
    WsClient client(server_->port());
    ASSERT_FALSE(client.handshake_error()) << client.handshake_error().message();
    for (int i = 0; i < 50; ++i) client.send("m" + std::to_string(i));
    for (int i = 0; i < 50; ++i) {
        auto [message, ec] = client.read();
        ASSERT_FALSE(ec) << ec.message();
        EXPECT_EQ(message, "echo:m" + std::to_string(i));
    }
    client.close();
    ASSERT_TRUE(seen_.wait([&] { return seen_.closes.size() == 1; }));
    EXPECT_EQ(seen_.closes[0].first, 1000);
    EXPECT_TRUE(seen_.sockets[0]->closed());
    EXPECT_FALSE(seen_.sockets[0]->send_text("late"));
}

TEST_F(WebSocketTest, APlainGetIs426AndOtherMethods405) {
    start();
    testing::Client client(server_->port());
    ASSERT_TRUE(client.send("GET /ws HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto response = client.read_response();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 426);
    EXPECT_EQ(response->headers["upgrade"], "websocket");
    ASSERT_TRUE(client.send("POST /ws HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
    auto post = client.read_response();
    ASSERT_TRUE(post.has_value());
    EXPECT_EQ(post->status, 405);
}

TEST_F(WebSocketTest, ARefusalIsAnHttpAnswer) {
    start({}, 401);
    WsClient client(server_->port());
    EXPECT_TRUE(client.handshake_error());
    std::lock_guard lock(seen_.mutex);
    EXPECT_TRUE(seen_.sockets.empty());
}

TEST_F(WebSocketTest, AnOversizeMessageClosesWith1009AndOthersGoOn) {
    WebSocketOptions options;
    options.max_message_bytes = 1024;
    start(options);
    WsClient big(server_->port());
    WsClient other(server_->port());
    ASSERT_FALSE(big.handshake_error());
    ASSERT_FALSE(other.handshake_error());
    big.send(std::string(4096, 'x'));
    auto [message, ec] = big.read();
    // The close frame arrives; the client's answer to it may meet a closed socket.
    EXPECT_TRUE(ec);
    EXPECT_EQ(big.reason().code, websocket::close_code::too_big);
    ASSERT_TRUE(seen_.wait([&] { return seen_.closes.size() == 1; }));
    EXPECT_EQ(seen_.closes[0].first, 1009);
    other.send("still here");
    auto [echo, other_ec] = other.read();
    ASSERT_FALSE(other_ec);
    EXPECT_EQ(echo, "echo:still here");
    other.close();
}

TEST_F(WebSocketTest, TheServerClosesWithItsCodeAfterQueuedMessages) {
    start();
    WsClient client(server_->port());
    ASSERT_TRUE(seen_.wait([&] { return seen_.sockets.size() == 1; }));
    auto socket = seen_.sockets[0];
    EXPECT_TRUE(socket->send_text("one"));
    EXPECT_TRUE(socket->send_text("two"));
    EXPECT_TRUE(socket->close(4000, "bye"));
    EXPECT_FALSE(socket->send_text("after close"));
    EXPECT_EQ(client.read().first, "one");
    EXPECT_EQ(client.read().first, "two");
    auto [message, ec] = client.read();
    EXPECT_EQ(ec, websocket::error::closed);
    EXPECT_EQ(client.reason().code, 4000);
    ASSERT_TRUE(seen_.wait([&] { return seen_.closes.size() == 1; }));
    EXPECT_EQ(seen_.closes[0].first, 4000);
}

TEST_F(WebSocketTest, AClientThatNeverReadsIsCutAndOthersAreServed) {
    WebSocketOptions options;
    options.max_queued_bytes = 256 * 1024;
    start(options);
    WsClient idle(server_->port());
    ASSERT_TRUE(seen_.wait([&] { return seen_.sockets.size() == 1; }));
    auto socket = seen_.sockets[0];
    // The client reads nothing: the kernel buffers fill, then the queue, then the cut.
    const std::string chunk(64 * 1024, 'a');
    bool refused = false;
    for (int i = 0; i < 100000 && !refused; ++i) refused = !socket->send_text(chunk);
    EXPECT_TRUE(refused);
    ASSERT_TRUE(seen_.wait([&] { return seen_.closes.size() == 1; }));
    EXPECT_EQ(seen_.closes[0].first, 1008);
    WsClient other(server_->port());
    other.send("hi");
    auto [echo, ec] = other.read();
    ASSERT_FALSE(ec);
    EXPECT_EQ(echo, "echo:hi");
    other.close();
}

TEST_F(WebSocketTest, DrainClosesOpenSocketsWith1001) {
    start();
    WsClient client(server_->port());
    ASSERT_TRUE(seen_.wait([&] { return seen_.sockets.size() == 1; }));
    std::thread reader([&] {
        auto [message, ec] = client.read();
        EXPECT_EQ(ec, websocket::error::closed);
        EXPECT_EQ(client.reason().code, 1001);
    });
    EXPECT_TRUE(server_->drain(kGuard).has_value());
    reader.join();
    ASSERT_TRUE(seen_.wait([&] { return seen_.closes.size() == 1; }));
    EXPECT_EQ(seen_.closes[0].first, 1001);
}

TEST_F(WebSocketTest, StopFiresOnCloseOfOpenSockets) {
    start();
    WsClient client(server_->port());
    ASSERT_TRUE(seen_.wait([&] { return seen_.sockets.size() == 1; }));
    server_->stop();
    std::lock_guard lock(seen_.mutex);
    ASSERT_EQ(seen_.closes.size(), 1u);
    EXPECT_EQ(seen_.closes[0].first, 1001);
    EXPECT_FALSE(seen_.sockets[0]->send_text("after stop"));
}

TEST_F(WebSocketTest, RoutesAreChecked) {
    auto server = HttpServer::create({});
    ASSERT_TRUE(server.has_value());
    auto handler = [](std::shared_ptr<WebSocket>) { return WebSocketAccept{}; };
    EXPECT_FALSE((*server)->add_websocket_route("ws", handler, {}).has_value());
    EXPECT_FALSE((*server)->add_websocket_route("/ws", nullptr, {}).has_value());
    WebSocketOptions zero;
    zero.max_message_bytes = 0;
    EXPECT_FALSE((*server)->add_websocket_route("/ws", handler, zero).has_value());
    EXPECT_TRUE((*server)->add_websocket_route("/ws", handler, {}).has_value());
    EXPECT_FALSE((*server)->add_websocket_route("/ws", handler, {}).has_value());
    EXPECT_FALSE((*server)->add_route("GET", "/ws", [](auto) {}).has_value());
}

}  // namespace
}  // namespace omnirt::serve::http

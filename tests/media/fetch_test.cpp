// fetch_url against a local one-connection HTTP server: the body arrives, and a status other than
// 2xx, a body over the cap (declared or streamed), a server that never answers, a refused
// connection, redirect loops and non-http schemes each give their error.
#include "media/fetch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace omnirt::media {
namespace {

// Serves `response` (raw HTTP) to every connection until destroyed; "" holds the connection
// open without answering.
class OneShotServer {
  public:
    explicit OneShotServer(std::string response) : response_(std::move(response)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = 0;
        OMNI_CHECK(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "bind");
        socklen_t length = sizeof address;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
        port_ = ntohs(address.sin_port);
        OMNI_CHECK(::listen(fd_, 8) == 0, "listen");
        thread_ = std::thread([this] { serve(); });
    }
    ~OneShotServer() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        thread_.join();
        for (int client : held_) ::close(client);
    }
    [[nodiscard]] std::string url(const std::string& path = "/a") const {
        return "http://127.0.0.1:" + std::to_string(port_) + path;
    }

  private:
    void serve() {
        while (!stop_) {
            const int client = ::accept(fd_, nullptr, nullptr);
            if (client < 0) return;
            char buffer[4096];
            (void)::recv(client, buffer, sizeof buffer, 0);  // the request (one read suffices)
            if (response_.empty()) {
                held_.push_back(client);  // never answer
                continue;
            }
            (void)::send(client, response_.data(), response_.size(), MSG_NOSIGNAL);
            ::close(client);
        }
    }

    std::string response_;
    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::vector<int> held_;
    std::thread thread_;
};

std::string ok_response(const std::string& body) {
    return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
}

TEST(FetchTest, ReturnsTheBody) {
    OneShotServer server(ok_response("image bytes"));
    auto bytes = fetch_url(server.url());
    ASSERT_TRUE(bytes.has_value()) << bytes.error().to_string();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size()),
              "image bytes");
}

TEST(FetchTest, StatusOtherThan2xxIsUnavailableNamingIt) {
    OneShotServer server(
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    auto bytes = fetch_url(server.url());
    ASSERT_FALSE(bytes.has_value());
    EXPECT_EQ(bytes.error().code, ErrorCode::unavailable);
    EXPECT_NE(bytes.error().message.find("404"), std::string::npos) << bytes.error().message;
}

TEST(FetchTest, BodiesOverTheCapStop) {
    OneShotServer declared(ok_response(std::string(5000, 'x')));
    auto bytes = fetch_url(declared.url(), {.max_bytes = 1000});
    ASSERT_FALSE(bytes.has_value());
    EXPECT_EQ(bytes.error().code, ErrorCode::out_of_range);
    // No Content-Length: the cap applies while the body streams in.
    OneShotServer streamed("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + std::string(5000, 'y'));
    bytes = fetch_url(streamed.url(), {.max_bytes = 1000});
    ASSERT_FALSE(bytes.has_value());
    EXPECT_EQ(bytes.error().code, ErrorCode::out_of_range);
}

TEST(FetchTest, ASilentServerTimesOut) {
    OneShotServer silent("");
    auto bytes = fetch_url(silent.url(), {.timeout = std::chrono::milliseconds(300)});
    ASSERT_FALSE(bytes.has_value());
    EXPECT_EQ(bytes.error().code, ErrorCode::deadline_exceeded);
}

TEST(FetchTest, RefusedConnectionsRedirectLoopsAndOtherSchemesFail) {
    EXPECT_EQ(fetch_url("http://127.0.0.1:1/x").error().code, ErrorCode::unavailable);
    OneShotServer loop(
        "HTTP/1.1 302 Found\r\nLocation: /a\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n");
    auto bytes = fetch_url(loop.url(), {.max_redirects = 2});
    ASSERT_FALSE(bytes.has_value());
    EXPECT_EQ(bytes.error().code, ErrorCode::unavailable);
    for (const char* url : {"file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://x", "", "http"}) {
        EXPECT_EQ(fetch_url(url).error().code, ErrorCode::invalid_argument) << url;
    }
    // A redirect to another scheme is refused too.
    OneShotServer to_file(
        "HTTP/1.1 302 Found\r\nLocation: file:///etc/passwd\r\n"
        "Content-Length: 0\r\nConnection: close\r\n\r\n");
    EXPECT_FALSE(fetch_url(to_file.url()).has_value());
}

}  // namespace
}  // namespace omnirt::media

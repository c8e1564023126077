// HttpServer over real sockets: routing, keep-alive, pipelining, limits, malformed input, timeouts.
#include "serve/http/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "serve/http/test_client.h"
#include "support/threads.h"

namespace omnirt::serve::http {
namespace {
using testing::Client;

class ServerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        fds_before_ = testing::open_fds();
        threads_before_ = testing::thread_count();
    }
    void TearDown() override {
        server_.reset();
        for (auto& responder : responders_) responder.join();
        EXPECT_EQ(testing::open_fds(), fds_before_) << "fds leaked";
        EXPECT_TRUE(omnirt::testing::thread_count_settles_to(threads_before_)) << "threads leaked";
    }
    void start(HttpServerOptions options = {}) {
        auto server = HttpServer::create(std::move(options));
        ASSERT_TRUE(server.has_value()) << server.error().to_string();
        server_ = std::move(*server);
        ASSERT_TRUE(server_
                        ->add_route("GET", "/hello",
                                    [](std::shared_ptr<HttpExchange> ex) {
                                        ex->respond(200, "text/plain",
                                                    "hello " + ex->request().query,
                                                    {{"x-custom", "1"}});
                                    })
                        .has_value());
        ASSERT_TRUE(server_
                        ->add_route("POST", "/echo",
                                    [this](std::shared_ptr<HttpExchange> ex) {
                                        const auto& headers = ex->request().headers;
                                        auto it = headers.find("x-tag");
                                        std::string tag = it == headers.end() ? "" : it->second;
                                        // Answered from another thread, like the pipeline
                                        // coordinator does.
                                        std::lock_guard lock(responders_mutex_);
                                        responders_.emplace_back([ex, tag] {
                                            ex->respond(200, "text/plain",
                                                        tag + ":" + ex->request().body);
                                        });
                                    })
                        .has_value());
        ASSERT_TRUE(
            server_->add_route("GET", "/drop", [](std::shared_ptr<HttpExchange>) {}).has_value());
        ASSERT_TRUE(
            server_
                ->add_route("GET", "/throw",
                            [](std::shared_ptr<HttpExchange>) { throw std::runtime_error("boom"); })
                .has_value());
        ASSERT_TRUE(server_->start().has_value());
    }
    std::uint16_t port() const { return server_->port(); }

    std::unique_ptr<HttpServer> server_;
    std::mutex responders_mutex_;
    std::vector<std::thread> responders_;
    int fds_before_ = 0;
    int threads_before_ = 0;
};

std::string get(const std::string& path, const std::string& extra = "") {
    return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}
std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
    return "POST " + path +
           " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
           extra + "\r\n" + body;
}

TEST_F(ServerTest, RoutesAnswer404And405WithOpenAiErrors) {
    start();
    EXPECT_NE(port(), 0);
    Client client(port());
    ASSERT_TRUE(client.send(get("/hello?name=a")));
    auto ok = client.read_response();
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200);
    EXPECT_EQ(ok->body, "hello name=a");
    EXPECT_EQ(ok->headers["x-custom"], "1");
    EXPECT_EQ(ok->headers["content-type"], "text/plain");

    ASSERT_TRUE(client.send(get("/nope")));
    auto missing = client.read_response();
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    EXPECT_NE(missing->body.find("\"error\""), std::string::npos);
    EXPECT_NE(missing->body.find("\"invalid_request_error\""), std::string::npos);
    EXPECT_NE(missing->body.find("\"param\":null"), std::string::npos);

    ASSERT_TRUE(client.send(post("/hello", "x")));
    auto wrong = client.read_response();
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 405);
    EXPECT_EQ(wrong->headers["allow"], "GET");
}

TEST_F(ServerTest, AddRouteRejectsDuplicatesBadInputAndLateRoutes) {
    auto server = HttpServer::create({});
    ASSERT_TRUE(server.has_value());
    auto noop = [](std::shared_ptr<HttpExchange>) {};
    EXPECT_TRUE((*server)->add_route("GET", "/a", noop).has_value());
    EXPECT_EQ((*server)->add_route("GET", "/a", noop).error().code, ErrorCode::already_exists);
    EXPECT_EQ((*server)->add_route("GET", "a", noop).error().code, ErrorCode::invalid_argument);
    EXPECT_EQ((*server)->add_route("GET", "/b", nullptr).error().code, ErrorCode::invalid_argument);
    ASSERT_TRUE((*server)->start().has_value());
    EXPECT_EQ((*server)->add_route("GET", "/c", noop).error().code, ErrorCode::failed_precondition);
    EXPECT_FALSE((*server)->start().has_value());
}

TEST_F(ServerTest, CreateRejectsBadOptions) {
    HttpServerOptions options;
    options.host = "not-an-ip";
    EXPECT_EQ(HttpServer::create(options).error().code, ErrorCode::invalid_argument);
    options = {};
    options.threads = 0;
    EXPECT_FALSE(HttpServer::create(options).has_value());
    start();
    options = {};
    options.port = port();  // taken
    EXPECT_EQ(HttpServer::create(options).error().code, ErrorCode::unavailable);
}

TEST_F(ServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
    start();
    Client client(port());
    for (int i = 0; i < 5; ++i) {
        std::string body = "body" + std::to_string(i);
        ASSERT_TRUE(client.send(post("/echo", body, "X-Tag: t" + std::to_string(i) + "\r\n")));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->status, 200);
        EXPECT_EQ(response->body, "t" + std::to_string(i) + ":" + body);
        EXPECT_EQ(response->headers.count("connection"), 0u);
    }
}

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
    start();
    Client client(port());
    std::string all;
    for (int i = 0; i < 8; ++i)
        all += post("/echo", std::string(i * 100, 'a'), "X-Tag: " + std::to_string(i) + "\r\n");
    ASSERT_TRUE(client.send(all));
    for (int i = 0; i < 8; ++i) {
        auto response = client.read_response();
        ASSERT_TRUE(response) << i;
        EXPECT_EQ(response->body, std::to_string(i) + ":" + std::string(i * 100, 'a'));
    }
}

TEST_F(ServerTest, ChunkedRequestBodiesAreDecoded) {
    start();
    Client client(port());
    ASSERT_TRUE(client.send(
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Tag: c\r\n\r\n"
        "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->body, "c:abcde");
}

TEST_F(ServerTest, Http10AndConnectionCloseCloseAfterTheResponse) {
    start();
    {
        Client client(port());
        ASSERT_TRUE(client.send("GET /hello HTTP/1.0\r\n\r\n"));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->status, 200);
        EXPECT_EQ(response->headers["connection"], "close");
        EXPECT_TRUE(client.wait_closed());
    }
    {
        Client client(port());
        ASSERT_TRUE(client.send(get("/hello", "Connection: close\r\n")));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->headers["connection"], "close");
        EXPECT_TRUE(client.wait_closed());
    }
    {
        Client client(port());
        ASSERT_TRUE(client.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->headers["connection"], "keep-alive");
        ASSERT_TRUE(client.send(get("/hello")));
        EXPECT_TRUE(client.read_response());
    }
}

TEST_F(ServerTest, DroppedOrThrowingHandlersAnswer500) {
    start();
    Client client(port());
    ASSERT_TRUE(client.send(get("/drop")));
    auto dropped = client.read_response();
    ASSERT_TRUE(dropped);
    EXPECT_EQ(dropped->status, 500);
    EXPECT_NE(dropped->body.find("server_error"), std::string::npos);
    ASSERT_TRUE(client.send(get("/throw")));
    auto thrown = client.read_response();
    ASSERT_TRUE(thrown);
    EXPECT_EQ(thrown->status, 500);
    EXPECT_NE(thrown->body.find("boom"), std::string::npos);
    ASSERT_TRUE(client.send(get("/hello")));  // the connection still works
    EXPECT_EQ(client.read_response()->status, 200);
}

TEST_F(ServerTest, OversizedBodiesGet413WithTheHookBody) {
    HttpServerOptions options;
    options.max_body_bytes = 1024;
    options.error_body = [](int status, std::string_view) {
        return "{\"custom\":" + std::to_string(status) + "}";
    };
    start(options);
    {
        Client client(port());
        ASSERT_TRUE(client.send(post("/echo", std::string(1024, 'x'))));
        EXPECT_EQ(client.read_response()->status, 200);
        ASSERT_TRUE(client.send(post("/echo", std::string(2000, 'x'))));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->status, 413);
        EXPECT_EQ(response->body, "{\"custom\":413}");
        EXPECT_TRUE(client.wait_closed());
    }
    {
        Client client(port());
        ASSERT_TRUE(client.send(
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999\r\n\r\nabc"));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->status, 413);
    }
    {
        Client client(port());  // chunked bodies count too
        std::string chunked =
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
        for (int i = 0; i < 5; ++i) chunked += "200\r\n" + std::string(512, 'y') + "\r\n";
        ASSERT_TRUE(client.send(chunked));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->status, 413);
    }
}

TEST_F(ServerTest, OversizedHeadersGet431) {
    HttpServerOptions options;
    options.max_header_bytes = 1024;
    start(options);
    Client client(port());
    ASSERT_TRUE(client.send(get("/hello", "X-Big: " + std::string(4000, 'h') + "\r\n")));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 431);
    EXPECT_NE(response->body.find("\"error\""), std::string::npos);
    EXPECT_TRUE(client.wait_closed());
}

TEST_F(ServerTest, MalformedRequestsGet400AndClose) {
    start();
    const std::vector<std::string> hostile = {
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n",
        "GET\r\n\r\n",
        "GET /hello HTTP/9.9\r\n\r\n",
        "GET /hello HTTP/1.1\r\nBad Header Without Colon\r\n\r\n",
        "POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        "POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n",
    };
    for (const auto& request : hostile) {
        Client client(port());
        ASSERT_TRUE(client.send(request));
        auto response = client.read_response();
        ASSERT_TRUE(response) << request;
        EXPECT_EQ(response->status, 400) << request;
        EXPECT_EQ(response->headers["connection"], "close");
        EXPECT_TRUE(client.wait_closed()) << request;
    }
    Client healthy(port());  // the server is unharmed
    ASSERT_TRUE(healthy.send(get("/hello")));
    EXPECT_EQ(healthy.read_response()->status, 200);
}

TEST_F(ServerTest, TruncatedBodiesNeverReachTheHandler) {
    std::atomic<int> calls{0};
    auto server = HttpServer::create({});
    ASSERT_TRUE(server.has_value());
    server_ = std::move(*server);
    ASSERT_TRUE(server_
                    ->add_route("POST", "/count",
                                [&](std::shared_ptr<HttpExchange> ex) {
                                    ++calls;
                                    ex->respond(200, "text/plain", "ok");
                                })
                    .has_value());
    ASSERT_TRUE(server_->start().has_value());
    {
        Client client(port());
        ASSERT_TRUE(client.send("POST /count HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort"));
        ::shutdown(client.fd_for_test(), SHUT_WR);
        EXPECT_TRUE(client.wait_closed());
    }
    Client client(port());
    ASSERT_TRUE(client.send(post("/count", "full")));
    EXPECT_EQ(client.read_response()->status, 200);
    EXPECT_EQ(calls.load(), 1);
}

TEST_F(ServerTest, SlowClientsAreClosedAfterTheReadTimeout) {
    HttpServerOptions options;
    // Long enough that a loaded machine sends the idle client's request within it.
    options.read_timeout = std::chrono::milliseconds(1000);
    options.idle_timeout = std::chrono::milliseconds(1000);
    start(options);
    {
        Client silent(port());  // never sends a byte
        EXPECT_TRUE(silent.wait_closed());
    }
    {
        Client slow(port());  // starts a request, never finishes it
        ASSERT_TRUE(slow.send("GET /hello HTTP/1.1\r\nHost: x\r\n"));
        EXPECT_TRUE(slow.wait_closed());
    }
    {
        Client idle(port());  // keep-alive connection with nothing after its first request
        ASSERT_TRUE(idle.send(get("/hello")));
        auto response = idle.read_response();
        ASSERT_TRUE(response.has_value());
        EXPECT_EQ(response->status, 200);
        EXPECT_TRUE(idle.wait_closed());
    }
}

TEST_F(ServerTest, ConnectionsBeyondTheLimitAreClosed) {
    HttpServerOptions options;
    options.max_connections = 1;
    start(options);
    Client first(port());
    ASSERT_TRUE(first.send(get("/hello")));
    EXPECT_EQ(first.read_response()->status, 200);  // accepted and registered
    Client second(port());
    EXPECT_TRUE(second.wait_closed());
    ASSERT_TRUE(first.send(get("/hello")));
    EXPECT_EQ(first.read_response()->status, 200);
}

}  // namespace
}  // namespace omnirt::serve::http

// HttpExchange across threads: streaming, disconnects, many streams, drain and stop.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "serve/http/http_server.h"
#include "serve/http/test_client.h"
#include "support/threads.h"

namespace omnirt::serve::http {
namespace {
using namespace std::chrono_literals;
using testing::Client;

constexpr auto kGuard = 30s;  // hang guard, never a synchronisation sleep

// Exchanges the handler parked, for the test thread to answer.
class Parked {
  public:
    void add(std::shared_ptr<HttpExchange> exchange) {
        std::lock_guard lock(mutex_);
        exchanges_.push_back(std::move(exchange));
        changed_.notify_all();
    }
    bool wait_for(std::size_t count) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, kGuard, [&] { return exchanges_.size() >= count; });
    }
    std::vector<std::shared_ptr<HttpExchange>> take() {
        std::lock_guard lock(mutex_);
        return std::move(exchanges_);
    }

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<std::shared_ptr<HttpExchange>> exchanges_;
};

class ExchangeTest : public ::testing::Test {
  protected:
    void SetUp() override {
        fds_before_ = testing::open_fds();
        threads_before_ = testing::thread_count();
    }
    void TearDown() override {
        server_.reset();
        parked_.take();
        EXPECT_EQ(testing::open_fds(), fds_before_) << "fds leaked";
        EXPECT_TRUE(omnirt::testing::thread_count_settles_to(threads_before_)) << "threads leaked";
    }
    void start(HttpHandler handler, HttpServerOptions options = {}) {
        auto server = HttpServer::create(std::move(options));
        ASSERT_TRUE(server.has_value()) << server.error().to_string();
        server_ = std::move(*server);
        ASSERT_TRUE(server_->add_route("POST", "/v1/x", std::move(handler)).has_value());
        ASSERT_TRUE(server_->start().has_value());
    }
    static std::string request(const std::string& extra = "") {
        return "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n" + extra + "\r\n{}";
    }

    std::unique_ptr<HttpServer> server_;
    Parked parked_;
    int fds_before_ = 0;
    int threads_before_ = 0;
};

TEST_F(ExchangeTest, StreamWrittenFromAnotherThreadArrivesInOrder) {
    std::vector<std::thread> writers;
    std::mutex writers_mutex;
    start([&](std::shared_ptr<HttpExchange> ex) {
        std::lock_guard lock(writers_mutex);
        writers.emplace_back([ex] {
            EXPECT_TRUE(
                ex->start_stream(200, "text/event-stream", {{"cache-control", "no-cache"}}));
            EXPECT_FALSE(ex->respond(200, "text/plain", "too late"));
            for (int i = 0; i < 100; ++i) {
                EXPECT_TRUE(ex->write("data: " + std::to_string(i) + "\n\n"));
            }
            EXPECT_TRUE(ex->write(""));
            EXPECT_TRUE(ex->finish());
            EXPECT_FALSE(ex->write("after"));
            EXPECT_FALSE(ex->finish());
        });
    });
    Client client(server_->port());
    for (int round = 0; round < 2; ++round) {  // the connection is reused after a stream
        ASSERT_TRUE(client.send(request()));
        auto response = client.read_response();
        ASSERT_TRUE(response);
        EXPECT_EQ(response->status, 200);
        EXPECT_TRUE(response->chunked);
        EXPECT_EQ(response->headers["content-type"], "text/event-stream");
        EXPECT_EQ(response->headers["cache-control"], "no-cache");
        ASSERT_EQ(response->chunks.size(), 100u);
        for (int i = 0; i < 100; ++i) {
            EXPECT_EQ(response->chunks[i], "data: " + std::to_string(i) + "\n\n");
        }
    }
    // A writer can finish before the handler's emplace_back returns: join under its lock.
    std::lock_guard lock(writers_mutex);
    for (auto& writer : writers) writer.join();
}

TEST_F(ExchangeTest, AReaderTooFarBehindAStreamIsCutNotBufferedWithoutBound) {
    HttpServerOptions options;
    options.max_stream_buffer_bytes = 256 * 1024;
    options.stream_high_water_bytes = 64 * 1024;
    options.stream_low_water_bytes = 16 * 1024;
    std::atomic<int> disconnects{0};
    // The handler hands its writer thread over: the writer may finish before the handler's
    // thread could have stored it anywhere the test reads.
    std::promise<std::thread> writer_started;
    std::promise<bool> refused;
    start(
        [&](std::shared_ptr<HttpExchange> ex) {
            ex->on_disconnect([&] { ++disconnects; });
            writer_started.set_value(std::thread([ex, &refused] {
                ex->start_stream(200, "text/event-stream");
                // The client reads nothing: the kernel's buffers fill, then ours, then the cut.
                const std::string chunk(16 * 1024, 'x');
                bool ok = true;
                for (int i = 0; i < 100000 && ok; ++i) ok = ex->write(chunk);
                refused.set_value(!ok && ex->disconnected());
            }));
        },
        options);
    Client idle(server_->port());
    ASSERT_TRUE(idle.send(request()));
    auto writer_future = writer_started.get_future();
    ASSERT_EQ(writer_future.wait_for(kGuard), std::future_status::ready);
    std::thread writer = writer_future.get();
    auto result = refused.get_future();
    const bool finished = result.wait_for(kGuard) == std::future_status::ready;
    if (!finished) idle.close();  // a hang: let the writer see the disconnect before the join
    writer.join();
    ASSERT_TRUE(finished);
    EXPECT_TRUE(result.get());
    EXPECT_EQ(disconnects.load(), 1);
}

TEST_F(ExchangeTest, Http10StreamsAreUnframedAndClose) {
    start([](std::shared_ptr<HttpExchange> ex) {
        ex->start_stream(200, "text/plain");
        ex->write("a");
        ex->write("b");
        ex->finish();
    });
    Client client(server_->port());
    ASSERT_TRUE(client.send("POST /v1/x HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}"));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_FALSE(response->chunked);
    EXPECT_EQ(response->body, "ab");
}

TEST_F(ExchangeTest, DroppingAStreamingExchangeFinishesIt) {
    start([](std::shared_ptr<HttpExchange> ex) {
        ex->start_stream(200, "text/plain");
        ex->write("only");
    });
    Client client(server_->port());
    ASSERT_TRUE(client.send(request()));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->body, "only");
}

TEST_F(ExchangeTest, HeadersWithLineBreaksAreDropped) {
    start([](std::shared_ptr<HttpExchange> ex) {
        ex->respond(201, "text/plain", "x",
                    {{"x-ok", "1"}, {"x-evil", "a\r\nSet-Cookie: b"}, {"content-length", "99"}});
    });
    Client client(server_->port());
    ASSERT_TRUE(client.send(request()));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 201);
    EXPECT_EQ(response->headers["x-ok"], "1");
    EXPECT_EQ(response->headers.count("x-evil"), 0u);
    EXPECT_EQ(response->headers.count("set-cookie"), 0u);
    EXPECT_EQ(response->body, "x");
}

TEST_F(ExchangeTest, DisconnectDuringAStreamFiresOnDisconnect) {
    std::promise<void> gone;
    start([&](std::shared_ptr<HttpExchange> ex) {
        ex->on_disconnect([&gone] { gone.set_value(); });
        ex->start_stream(200, "text/event-stream");
        ex->write("data: first\n\n");
        parked_.add(ex);
    });
    {
        Client client(server_->port());
        ASSERT_TRUE(client.send(request()));
        ASSERT_TRUE(client.read_until("data: first"));
    }
    ASSERT_EQ(gone.get_future().wait_for(kGuard), std::future_status::ready);
    ASSERT_TRUE(parked_.wait_for(1));
    auto exchange = parked_.take().front();
    EXPECT_TRUE(exchange->disconnected());
    EXPECT_FALSE(exchange->write("data: late\n\n"));
    EXPECT_FALSE(exchange->finish());
    bool late_called = false;
    exchange->on_disconnect([&] { late_called = true; });  // already gone: runs at once
    EXPECT_TRUE(late_called);
}

TEST_F(ExchangeTest, DisconnectWhileAResponseIsPendingFiresOnDisconnect) {
    std::promise<void> gone;
    start([&](std::shared_ptr<HttpExchange> ex) {
        // The callback may hold the exchange: it is dropped once it ran.
        ex->on_disconnect([&gone, ex] { gone.set_value(); });
        parked_.add(ex);
    });
    {
        Client client(server_->port());
        ASSERT_TRUE(client.send(request()));
        ASSERT_TRUE(parked_.wait_for(1));
        client.reset();
    }
    ASSERT_EQ(gone.get_future().wait_for(kGuard), std::future_status::ready);
    auto exchange = parked_.take().front();
    EXPECT_TRUE(exchange->disconnected());
    EXPECT_FALSE(exchange->respond(200, "text/plain", "nobody listens"));
}

TEST_F(ExchangeTest, CompletedExchangesDoNotReportDisconnects) {
    std::atomic<int> fired{0};
    start([&](std::shared_ptr<HttpExchange> ex) {
        ex->on_disconnect([&fired, ex] { ++fired; });
        ex->respond(200, "text/plain", "done");
    });
    {
        Client client(server_->port());
        ASSERT_TRUE(client.send(request()));
        EXPECT_EQ(client.read_response()->status, 200);
    }
    server_->stop();
    EXPECT_EQ(fired.load(), 0);
}

TEST_F(ExchangeTest, TwoHundredConcurrentStreamsOnTwoThreads) {
    constexpr std::size_t kStreams = 200;
    HttpServerOptions options;
    options.threads = 2;
    start(
        [&](std::shared_ptr<HttpExchange> ex) {
            ex->start_stream(200, "text/event-stream");
            ex->write("data: hello\n\n");
            parked_.add(ex);
        },
        options);
    std::vector<std::unique_ptr<Client>> clients;
    for (std::size_t i = 0; i < kStreams; ++i) {
        clients.push_back(std::make_unique<Client>(server_->port()));
        ASSERT_TRUE(clients.back()->send(request()));
    }
    ASSERT_TRUE(parked_.wait_for(kStreams));
    for (auto& client : clients) ASSERT_TRUE(client->read_until("data: hello\n\n"));
    EXPECT_EQ(server_->connection_count(), kStreams);
    auto exchanges = parked_.take();
    std::thread finisher([&] {
        for (std::size_t i = 0; i < exchanges.size(); ++i) {
            exchanges[i]->write("data: " + std::to_string(i) + "\n\n");
            exchanges[i]->finish();
        }
    });
    for (auto& client : clients) {
        auto tail = client->read_until("0\r\n\r\n");
        ASSERT_TRUE(tail);
        EXPECT_NE(tail->find("data: "), std::string::npos);
    }
    finisher.join();
}

TEST_F(ExchangeTest, DrainWaitsForAnInFlightExchange) {
    start([&](std::shared_ptr<HttpExchange> ex) { parked_.add(ex); });
    Client busy(server_->port());
    ASSERT_TRUE(busy.send(request()));
    ASSERT_TRUE(parked_.wait_for(1));
    Client idle(server_->port());  // connected, no request: closed by the drain
    auto drained = std::async(std::launch::async, [&] { return server_->drain(kGuard); });
    EXPECT_TRUE(idle.wait_closed());
    // The drain is under way (it closed the idle connection) and still waits for `busy`.
    EXPECT_EQ(drained.wait_for(0s), std::future_status::timeout);
    auto exchange = parked_.take().front();
    EXPECT_TRUE(exchange->respond(200, "text/plain", "finished"));
    auto response = busy.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->body, "finished");
    EXPECT_EQ(response->headers["connection"], "close");
    EXPECT_TRUE(drained.get().has_value());
    EXPECT_TRUE(busy.wait_closed());
    Client late(server_->port());
    EXPECT_FALSE(late.connected() && late.send(request()) && late.read_response());
}

TEST_F(ExchangeTest, DrainTimesOutThenStops) {
    std::promise<void> gone;
    start([&](std::shared_ptr<HttpExchange> ex) {
        ex->on_disconnect([&gone] { gone.set_value(); });
        parked_.add(ex);
    });
    Client busy(server_->port());
    ASSERT_TRUE(busy.send(request()));
    ASSERT_TRUE(parked_.wait_for(1));
    auto status = server_->drain(100ms);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::deadline_exceeded);
    EXPECT_EQ(gone.get_future().wait_for(0s), std::future_status::ready);
    EXPECT_TRUE(busy.wait_closed());
    EXPECT_FALSE(parked_.take().front()->respond(200, "text/plain", "too late"));
}

TEST_F(ExchangeTest, StopClosesOpenConnectionsAndExchangesOutliveTheServer) {
    std::promise<void> gone;
    start([&](std::shared_ptr<HttpExchange> ex) {
        ex->on_disconnect([&gone] { gone.set_value(); });
        ex->start_stream(200, "text/plain");
        parked_.add(ex);
    });
    Client streaming(server_->port());
    ASSERT_TRUE(streaming.send(request()));
    ASSERT_TRUE(parked_.wait_for(1));
    std::vector<std::unique_ptr<Client>> idle;
    for (int i = 0; i < 5; ++i) idle.push_back(std::make_unique<Client>(server_->port()));
    server_->stop();
    server_->stop();  // idempotent
    EXPECT_EQ(gone.get_future().wait_for(0s), std::future_status::ready);
    EXPECT_TRUE(streaming.wait_closed());
    for (auto& client : idle) EXPECT_TRUE(client->wait_closed());
    auto exchange = parked_.take().front();
    server_.reset();
    EXPECT_FALSE(exchange->write("after the server is gone"));
    EXPECT_FALSE(exchange->finish());
}

TEST_F(ExchangeTest, AnswersRacingDisconnectsAreSafe) {
    std::mutex mutex;
    std::vector<std::thread> writers;
    start([&](std::shared_ptr<HttpExchange> ex) {
        std::lock_guard lock(mutex);
        writers.emplace_back([ex] {
            ex->start_stream(200, "text/plain");
            for (int i = 0; i < 200 && ex->write(std::string(1000, 'z')); ++i) {
            }
            ex->finish();
        });
    });
    for (int i = 0; i < 20; ++i) {
        Client client(server_->port());
        ASSERT_TRUE(client.send(request()));
        if (i % 2 == 0) {
            ASSERT_TRUE(client.read_until("\r\n\r\n"));
        }
        client.reset();
    }
    server_->stop();
    std::lock_guard lock(mutex);
    for (auto& writer : writers) writer.join();
}

}  // namespace
}  // namespace omnirt::serve::http

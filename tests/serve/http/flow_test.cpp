// Flow control of streamed responses: a reader that falls behind pauses the stream, catching up
// resumes it, a reader that stalls is cut after the stall timeout.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/http/http_server.h"
#include "serve/http/test_client.h"
#include "support/threads.h"

namespace omnirt::serve::http {
namespace {
using namespace std::chrono_literals;
using testing::Client;

constexpr auto kGuard = 30s;  // hang guard, never a synchronisation sleep

// The flow events of one exchange, and when they came; a producer waits on it while paused.
class FlowLog {
  public:
    void add(StreamFlow flow) {
        std::lock_guard lock(mutex_);
        events_.push_back(flow);
        times_.push_back(std::chrono::steady_clock::now());
        changed_.notify_all();
    }
    // A producer that honours the flow: returns at once unless paused, else when resumed (true)
    // or stalled (false). While it waits, waiting() says so.
    bool wait_while_paused() {
        std::unique_lock lock(mutex_);
        if (events_.empty() || events_.back() != StreamFlow::paused) return true;
        waiting_ = true;
        changed_.notify_all();
        bool resumed = changed_.wait_for(lock, kGuard, [&] {
            return events_.empty() || events_.back() == StreamFlow::resumed ||
                   events_.back() == StreamFlow::stalled;
        });
        waiting_ = false;
        return resumed && events_.back() == StreamFlow::resumed;
    }
    // Waits until the producer waits for a resume.
    bool wait_for_blocked_producer() {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, kGuard, [&] { return waiting_; });
    }
    std::vector<StreamFlow> events() {
        std::lock_guard lock(mutex_);
        return events_;
    }
    // From the last event but one to the last.
    std::chrono::steady_clock::duration last_interval() {
        std::lock_guard lock(mutex_);
        return times_.at(times_.size() - 1) - times_.at(times_.size() - 2);
    }

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<StreamFlow> events_;
    std::vector<std::chrono::steady_clock::time_point> times_;
    bool waiting_ = false;
};

// Paused and resumed alternate, starting with paused; stalled only right after paused.
void expect_well_formed(const std::vector<StreamFlow>& events) {
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (i % 2 == 0) {
            EXPECT_EQ(events[i], StreamFlow::paused) << "event " << i;
        } else {
            EXPECT_NE(events[i], StreamFlow::paused) << "event " << i;
            if (events[i] == StreamFlow::stalled) EXPECT_EQ(i + 1, events.size()) << "stalled last";
        }
    }
}

class FlowTest : public ::testing::Test {
  protected:
    void SetUp() override {
        fds_before_ = testing::open_fds();
        threads_before_ = testing::thread_count();
    }
    void TearDown() override {
        if (writer_.joinable()) writer_.join();
        server_.reset();
        EXPECT_EQ(testing::open_fds(), fds_before_) << "fds leaked";
        EXPECT_TRUE(omnirt::testing::thread_count_settles_to(threads_before_)) << "threads leaked";
    }
    static HttpServerOptions small_marks(std::chrono::milliseconds stall) {
        HttpServerOptions options;
        options.stream_high_water_bytes = 64 * 1024;
        options.stream_low_water_bytes = 16 * 1024;
        options.stream_stall_timeout = stall;
        return options;
    }
    // Serves POST /v1/x: the exchange is handed to the test thread (exchange()).
    void start(HttpServerOptions options) {
        auto server = HttpServer::create(std::move(options));
        ASSERT_TRUE(server.has_value()) << server.error().to_string();
        server_ = std::move(*server);
        ASSERT_TRUE(server_
                        ->add_route("POST", "/v1/x",
                                    [this](std::shared_ptr<HttpExchange> ex) {
                                        arrived_.set_value(std::move(ex));
                                    })
                        .has_value());
        ASSERT_TRUE(server_->start().has_value());
    }
    // Runs `body` with the exchange of the request that arrived, on a thread of its own.
    void produce_on_a_thread(std::function<void(std::shared_ptr<HttpExchange>)> body) {
        auto arrived = arrived_.get_future();
        ASSERT_EQ(arrived.wait_for(kGuard), std::future_status::ready);
        writer_ = std::thread([ex = arrived.get(), body] { body(ex); });
    }
    static std::string request() {
        return "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    }

    std::unique_ptr<HttpServer> server_;
    std::promise<std::shared_ptr<HttpExchange>> arrived_;
    std::thread writer_;
    int fds_before_ = 0;
    int threads_before_ = 0;
};

// 16 MiB in 4 KiB chunks, far more than the kernel's socket buffers hold, holding off while the
// stream is paused: the server's queue stays near the high-water mark. False when it stalled.
constexpr int kChunks = 4096;
bool produce(HttpExchange& ex, FlowLog& log) {
    const std::string chunk(4096, 'x');
    for (int i = 0; i < kChunks; ++i) {
        if (!log.wait_while_paused()) return false;
        if (!ex.write(chunk)) return false;
    }
    return true;
}

TEST_F(FlowTest, AReaderThatFallsBehindPausesTheStreamAndCatchingUpResumesIt) {
    FlowLog log;
    std::promise<bool> wrote;
    start(small_marks(60s));
    Client client(server_->port());
    ASSERT_TRUE(client.send(request()));
    produce_on_a_thread([&](std::shared_ptr<HttpExchange> ex) {
        ex->on_flow([&log](StreamFlow flow) { log.add(flow); });
        ex->start_stream(200, "text/plain");
        wrote.set_value(produce(*ex, log) && ex->write("END") && ex->finish());
    });
    // The client reads nothing: the kernel's buffers fill, then the server's past the mark.
    ASSERT_TRUE(log.wait_for_blocked_producer());  // paused before anything was read
    // Reading drains the stream: it resumes. Each chunk is framed as "1000\r\n" ... "\r\n".
    ASSERT_TRUE(client.read_until("\r\n\r\n"));
    auto chunks = client.read_exact(std::size_t{kChunks} * (6 + 4096 + 2));
    ASSERT_TRUE(chunks);
    EXPECT_EQ(chunks->substr(0, 6), "1000\r\n");
    ASSERT_TRUE(client.read_until("END"));
    auto result = wrote.get_future();
    ASSERT_EQ(result.wait_for(kGuard), std::future_status::ready);
    EXPECT_TRUE(result.get());
    const auto events = log.events();
    expect_well_formed(events);
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events.back(), StreamFlow::resumed);
}

TEST_F(FlowTest, AStalledReaderIsCutAfterTheStallTimeout) {
    FlowLog log;
    std::promise<void> gone;
    std::shared_future<void> gone_future = gone.get_future().share();
    std::promise<bool> refused;
    start(small_marks(300ms));
    Client idle(server_->port());
    ASSERT_TRUE(idle.send(request()));
    produce_on_a_thread([&](std::shared_ptr<HttpExchange> ex) {
        ex->on_flow([&log](StreamFlow flow) { log.add(flow); });
        ex->on_disconnect([&gone] { gone.set_value(); });
        ex->start_stream(200, "text/plain");
        bool finished = produce(*ex, log);
        // Disconnected right after the stall: later writes go nowhere.
        bool disconnected = gone_future.wait_for(kGuard) == std::future_status::ready;
        refused.set_value(!finished && disconnected && !ex->write("late"));
    });
    auto result = refused.get_future();
    ASSERT_EQ(result.wait_for(kGuard), std::future_status::ready);
    EXPECT_TRUE(result.get());
    const auto events = log.events();
    expect_well_formed(events);
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events.back(), StreamFlow::stalled);
    // The server starts the 300 ms timer a moment before its pause reaches the log: the margin
    // is for that moment on a loaded machine; a cut without waiting would be ~0.
    EXPECT_GE(log.last_interval(), 250ms) << "cut before the stall timeout";
    EXPECT_TRUE(idle.wait_closed());
}

TEST_F(FlowTest, BufferMarksMustBeOrdered) {
    HttpServerOptions options;
    options.stream_high_water_bytes = 1024;
    options.stream_low_water_bytes = 2048;
    auto server = HttpServer::create(options);
    ASSERT_FALSE(server.has_value());
    EXPECT_EQ(server.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(server.error().message.find("stream_low_water_bytes (2048)"), std::string::npos)
        << server.error().message;
    options.stream_low_water_bytes = 0;
    options.max_stream_buffer_bytes = 512;  // below the high-water mark
    EXPECT_FALSE(HttpServer::create(options).has_value());
    options.max_stream_buffer_bytes = 4096;
    options.stream_stall_timeout = 0ms;
    EXPECT_FALSE(HttpServer::create(options).has_value());
}

}  // namespace
}  // namespace omnirt::serve::http

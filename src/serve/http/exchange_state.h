#pragma once
// Internal: the state an HttpExchange shares with its connection (no Beast here).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/http/http_server.h"

namespace omnirt::serve::http::detail {

// One piece of output for the connection's write loop.
struct OutItem {
    // cut: the client fell too far behind a stream; the connection is closed at once.
    enum class Kind { response, stream_head, chunk, finish, abandon, cut };
    Kind kind = Kind::response;
    int status = 200;
    std::string content_type;
    std::string body;
    HttpHeaders headers;
};

// Server-wide: once `stopped` is set (under `mutex`) nothing may be posted to the io_context.
struct ServerCore {
    std::mutex mutex;
    bool stopped = false;
};

// Implemented by the connection: takes an item onto its strand. Called with ServerCore::mutex
// held and the server not stopped.
class ExchangeChannel {
  public:
    virtual ~ExchangeChannel() = default;
    virtual void post_output(std::shared_ptr<ExchangeState> state, OutItem item) = 0;
    // The stream of `state` just paused: cut it unless it resumes within the stall timeout
    // (ExchangeState::stalled says whether it still should be cut when the time is up).
    virtual void watch_stall(std::shared_ptr<ExchangeState> state) = 0;
};

// The byte marks of a stream (HttpServerOptions): flow control and the hard cap.
struct StreamLimits {
    std::size_t high_water = SIZE_MAX;
    std::size_t low_water = SIZE_MAX;
    std::size_t max_pending = SIZE_MAX;
    std::chrono::milliseconds stall_timeout{30000};
};

// Thread-safe: validates the respond/stream order and forwards items to the connection.
class ExchangeState : public std::enable_shared_from_this<ExchangeState> {
  public:
    // `limits`: when chunks queued and not yet written pause the stream, and cut it.
    ExchangeState(std::shared_ptr<ServerCore> core, std::weak_ptr<ExchangeChannel> channel,
                  StreamLimits limits = {})
        : core_(std::move(core)), channel_(std::move(channel)), limits_(limits) {}

    bool send(OutItem item);
    // The last HttpExchange went away: 500 if unanswered, finish if streaming.
    void abandon();
    // The client went away (or the server stopped): fires the callbacks once, on this thread.
    void mark_disconnected();
    // The connection wrote the final item.
    void mark_complete();
    // The connection wrote a chunk of `bytes` (its strand); may report StreamFlow::resumed.
    void written(std::size_t bytes);
    void on_disconnect(std::function<void()> callback);
    [[nodiscard]] bool disconnected() const;
    void on_flow(std::function<void(StreamFlow)> callback);
    // The stall timer of watch_stall fired (the connection's strand): true when the stream is
    // still paused and has been for the stall timeout; it then reports StreamFlow::stalled and
    // the connection cuts the stream.
    [[nodiscard]] bool stalled();
    [[nodiscard]] std::chrono::milliseconds stall_timeout() const { return limits_.stall_timeout; }

  private:
    enum class Phase { fresh, streaming, done };
    bool forward(OutItem item);
    // Runs the flow callback for every change not reported yet, in order (flow_mutex_ held
    // while it runs, mutex_ not).
    void report_flow();

    std::shared_ptr<ServerCore> core_;
    std::weak_ptr<ExchangeChannel> channel_;
    mutable std::mutex mutex_;
    Phase phase_ = Phase::fresh;                    // guarded by mutex_
    bool disconnected_ = false;                     // guarded by mutex_
    bool complete_ = false;                         // guarded by mutex_
    std::vector<std::function<void()>> callbacks_;  // guarded by mutex_
    const StreamLimits limits_;
    std::size_t pending_ = 0;  // chunk bytes sent here, not yet written; guarded by mutex_
    // Flow control, guarded by mutex_: the state, since when it is paused, whether the stall
    // cut was decided, and what the callback has been told so far.
    bool paused_ = false;
    std::chrono::steady_clock::time_point paused_since_{};
    bool stalled_ = false;
    bool reported_paused_ = false;
    bool reported_stalled_ = false;
    std::shared_ptr<std::function<void(StreamFlow)>> flow_callback_;
    std::mutex flow_mutex_;  // serialises the flow callback's calls
};

}  // namespace omnirt::serve::http::detail

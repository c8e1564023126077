#pragma once
// Internal: the state an HttpExchange shares with its connection (no Beast here).
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
};

// Thread-safe: validates the respond/stream order and forwards items to the connection.
class ExchangeState : public std::enable_shared_from_this<ExchangeState> {
  public:
    // `max_pending_bytes`: chunks queued and not yet written beyond this cut the stream.
    ExchangeState(std::shared_ptr<ServerCore> core, std::weak_ptr<ExchangeChannel> channel,
                  std::size_t max_pending_bytes = SIZE_MAX)
        : core_(std::move(core)), channel_(std::move(channel)), max_pending_(max_pending_bytes) {}

    bool send(OutItem item);
    // The last HttpExchange went away: 500 if unanswered, finish if streaming.
    void abandon();
    // The client went away (or the server stopped): fires the callbacks once, on this thread.
    void mark_disconnected();
    // The connection wrote the final item.
    void mark_complete();
    // The connection wrote a chunk of `bytes`.
    void written(std::size_t bytes);
    void on_disconnect(std::function<void()> callback);
    [[nodiscard]] bool disconnected() const;

  private:
    enum class Phase { fresh, streaming, done };
    bool forward(OutItem item);

    std::shared_ptr<ServerCore> core_;
    std::weak_ptr<ExchangeChannel> channel_;
    mutable std::mutex mutex_;
    Phase phase_ = Phase::fresh;                    // guarded by mutex_
    bool disconnected_ = false;                     // guarded by mutex_
    bool complete_ = false;                         // guarded by mutex_
    std::vector<std::function<void()>> callbacks_;  // guarded by mutex_
    const std::size_t max_pending_;
    std::size_t pending_ = 0;  // chunk bytes sent here, not yet written; guarded by mutex_
};

}  // namespace omnirt::serve::http::detail

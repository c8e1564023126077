#pragma once
// The async HTTP/1.1 server core of `omnirt serve`: Beast + Asio with C++20 coroutines behind a
// Beast-free API (docs/serve.md, "HTTP layer").
//
// Threads: `threads` IO threads run every connection; each connection lives on its own strand.
// Handlers are invoked on an IO thread and must not block. An HttpExchange may be answered from
// ANY thread, at any time, in any order relative to the client disconnecting: its methods post
// onto the connection's strand and shared ownership keeps everything alive (an exchange outliving
// its connection, or the whole server, is safe; its calls then return false).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"

namespace omnirt::serve::http {

// Header names are lowercased; repeated request headers are joined with ", ".
using HttpHeaders = std::map<std::string, std::string>;

struct HttpRequest {
    std::string method;  // as sent, e.g. "GET", "POST"
    std::string target;  // the request target, e.g. "/v1/models?x=1"
    std::string path;    // target up to '?'
    std::string query;   // after '?', without it ("" if none)
    HttpHeaders headers;
    std::string body;
    unsigned version = 11;  // 10 or 11
};

namespace detail {
class ExchangeState;
}
class WebSocket;  // websocket.h

// How a streamed response keeps up with its reader (HttpExchange::on_flow).
//  * paused: the chunks waiting unwritten exceeded the high-water mark; the producer should hold
//    its output (the API server pauses the request in the pipeline);
//  * resumed: they drained to the low-water mark; the producer may go on;
//  * stalled: it stayed paused for the stall timeout; the connection is cut right after (the
//    exchange then sees a disconnect), so the producer should end the request.
enum class StreamFlow { paused, resumed, stalled };
[[nodiscard]] std::string_view to_string(StreamFlow flow);
struct WebSocketAccept;
struct WebSocketOptions;

// One request and its response. Handed to the handler as shared_ptr; keep a copy for as long as
// the response is being produced. Every method is thread-safe.
//
// Either respond() once, or start_stream() once, write() any number of times, finish() once.
// Calls out of that order, after finish, or after the client went away return false and do
// nothing. Dropping the last reference without an answer sends 500; dropping it mid-stream
// ends the stream (finish()).
class HttpExchange {
  public:
    HttpExchange(std::shared_ptr<detail::ExchangeState> state, HttpRequest request);
    ~HttpExchange();
    HttpExchange(const HttpExchange&) = delete;
    HttpExchange& operator=(const HttpExchange&) = delete;

    [[nodiscard]] const HttpRequest& request() const { return request_; }

    // A complete response with Content-Length. `extra` header names/values with CR or LF are
    // dropped; Content-Length, Transfer-Encoding and Connection are set by the server.
    bool respond(int status, std::string_view content_type, std::string body,
                 HttpHeaders extra = {});
    // Starts a chunked response (HTTP/1.0 clients: raw body, then the connection closes). SSE is
    // content type "text/event-stream" with "data: ...\n\n" chunks the caller writes.
    bool start_stream(int status, std::string_view content_type, HttpHeaders extra = {});
    // One chunk, sent in call order; an empty chunk is ignored (returns true).
    bool write(std::string chunk);
    // Ends the stream.
    bool finish();

    // `callback` runs once when the client goes away (socket closed, read or write error, server
    // stop) before the exchange completed: on an IO thread (or the thread calling stop()), or at
    // once on this thread if that already happened. It must not block. Callbacks are dropped when
    // the exchange completes, so capturing the exchange in one does not leak.
    void on_disconnect(std::function<void()> callback);
    [[nodiscard]] bool disconnected() const;
    // `callback` runs on every change of the stream's flow (StreamFlow), in order and never
    // concurrently: paused and resumed alternate, starting with paused; stalled comes at most
    // once, after paused. paused runs on the thread calling write(), resumed and stalled on an
    // IO thread. It must not block, nor take a lock the writer holds around write(). Replaces
    // an earlier callback; dropped when the exchange completes.
    void on_flow(std::function<void(StreamFlow)> callback);

  private:
    std::shared_ptr<detail::ExchangeState> state_;
    HttpRequest request_;
};

using HttpHandler = std::function<void(std::shared_ptr<HttpExchange>)>;
// The body of an error the server produces itself (400, 404, 405, 413, 431, 500): JSON.
using ErrorBodyHook = std::function<std::string(int status, std::string_view message)>;

// {"error": {"message": ..., "type": ..., "param": null, "code": status}} (the OpenAI shape).
[[nodiscard]] std::string openai_error_body(int status, std::string_view message);

struct HttpServerOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;  // 0: the OS picks one; HttpServer::port() tells which
    int threads = 2;
    std::size_t max_body_bytes = 64u << 20;    // larger bodies: 413
    std::size_t max_header_bytes = 64u << 10;  // larger request line + headers: 431
    // A request must arrive completely within this time of its first byte (or of the connection
    // opening); otherwise the connection is closed.
    std::chrono::milliseconds read_timeout{30000};
    // A keep-alive connection with no new request for this long is closed.
    std::chrono::milliseconds idle_timeout{60000};
    // A single response write that takes longer closes the connection.
    std::chrono::milliseconds write_timeout{60000};
    // Flow control of streamed responses (docs/serve.md, "Slow readers"). Chunks that wait
    // unwritten (the client reads slower than the stream, and the kernel's socket buffers are
    // full) beyond stream_high_water_bytes make the exchange report StreamFlow::paused; once
    // they drain to stream_low_water_bytes, StreamFlow::resumed. A stream paused for
    // stream_stall_timeout is cut (StreamFlow::stalled, then a disconnect).
    std::size_t stream_high_water_bytes = 1u << 20;
    std::size_t stream_low_water_bytes = 256u << 10;
    std::chrono::milliseconds stream_stall_timeout{30000};
    // The last resort: a stream whose unwritten chunks would exceed this many bytes (a producer
    // that does not hold its output when paused) is cut at once: the connection closes and the
    // exchange sees a disconnect, so the request behind it is aborted instead of buffered
    // without bound. At least stream_high_water_bytes.
    std::size_t max_stream_buffer_bytes = 16u << 20;
    // Connections beyond this are closed as soon as they are accepted.
    std::size_t max_connections = 4096;
    ErrorBodyHook error_body;  // empty: openai_error_body
};

class HttpServer {
  public:
    // Binds and listens (so port() is known); serves nothing before start().
    static Result<std::unique_ptr<HttpServer>> create(HttpServerOptions options);
    ~HttpServer();  // stop()
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Exact path match. Before start() only (failed_precondition after); a duplicate
    // (method, path) is already_exists. Unknown path: 404; known path, other method: 405.
    Status add_route(std::string method, std::string path, HttpHandler handler);
    // A WebSocket endpoint at `path` (GET with an upgrade; websocket.h). The same rules; a path
    // may not be both an HTTP and a WebSocket route.
    Status add_websocket_route(std::string path,
                               std::function<WebSocketAccept(std::shared_ptr<WebSocket>)> handler,
                               const WebSocketOptions& options);

    Status start();
    [[nodiscard]] std::uint16_t port() const;

    // Graceful: stops accepting, closes idle connections, lets in-flight exchanges finish (their
    // responses say Connection: close), waits up to `timeout`, then stop(). deadline_exceeded if
    // connections were still open at the timeout. Not from an IO thread.
    Status drain(std::chrono::milliseconds timeout);
    // Immediate: closes every socket, fires on_disconnect of unfinished exchanges (on this
    // thread), joins the IO threads. Idempotent. Not from an IO thread.
    void stop();

    // Open connections (for tests and metrics).
    [[nodiscard]] std::size_t connection_count() const;

    struct Impl;

  private:
    explicit HttpServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace omnirt::serve::http

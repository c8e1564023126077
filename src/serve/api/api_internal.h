#pragma once
// Internal to the API server: the state every endpoint shares, and the helpers they use to
// answer. Not a public header.
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/client.h"
#include "client/output.h"
#include "media/audio.h"
#include "serve/api/api_server.h"
#include "serve/api/metrics.h"
#include "serve/api/work_pool.h"
#include "serve/http/http_server.h"
#include "serve/openai/protocol_error.h"
#include "serve/openai/responses.h"

namespace omnirt::serve::api {

using Clock = std::chrono::steady_clock;

struct ApiServer::State {
    ApiServerOptions options;
    client::Client& client;
    ServerMetrics metrics;
    std::atomic<std::size_t> generating{0};  // generation requests holding a concurrency slot
    std::unique_ptr<WorkPool> pool;
    std::unique_ptr<http::HttpServer> http;
    std::atomic<std::uint64_t> id_counter{0};
    std::atomic<std::size_t> realtime_sessions{0};
    // Admission (admission.cpp): requests waiting for a generation slot, in arrival order.
    struct Waiting {
        std::unique_ptr<class Exchange> exchange;
        std::function<void(std::unique_ptr<class Exchange>)> proceed;
    };
    std::mutex admission_mutex;
    std::deque<Waiting> waiting;           // guarded by admission_mutex
    double mean_generation_seconds = 1.0;  // guarded by admission_mutex (moving average)

    State(ApiServerOptions options_in, client::Client& client_in)
        : options(std::move(options_in)), client(client_in) {}
};
using ApiState = ApiServer::State;

// One HTTP request from its arrival to its answer: records the metrics exactly once.
class Exchange {
  public:
    Exchange(ApiState& state, std::shared_ptr<http::HttpExchange> http, std::string endpoint);
    ~Exchange();  // an unanswered exchange is answered 500 by the HTTP layer; counted here
    Exchange(const Exchange&) = delete;
    Exchange& operator=(const Exchange&) = delete;

    [[nodiscard]] ApiState& state() const { return state_; }
    [[nodiscard]] http::HttpExchange& http() const { return *http_; }
    [[nodiscard]] const http::HttpRequest& request() const { return http_->request(); }
    [[nodiscard]] double seconds_since_arrival() const;

    // Complete answers; false when the client is gone.
    bool respond(int status, std::string_view content_type, std::string body,
                 http::HttpHeaders extra = {});
    bool respond_json(int status, std::string body);
    bool respond_error(const openai::ProtocolError& error);
    // Streams: recorded (200, or 499 when the client left) when they finish.
    bool start_sse();
    // A 200 streamed as it is written (chunked), e.g. raw audio bytes.
    bool start_stream(std::string_view content_type);
    bool write(std::string chunk);
    bool finish();

    // Marks the exchange as holding a generation slot (admission.cpp): released when it ends.
    void hold_slot();

  private:
    void record(int status);

    ApiState& state_;
    std::shared_ptr<http::HttpExchange> http_;
    std::string endpoint_;
    Clock::time_point arrival_;
    bool recorded_ = false;
    bool admitted_ = false;
    Clock::time_point admitted_at_{};
    bool streaming_ = false;
};

// 401 when the server has an API key and the request does not carry it (answered; false).
bool authorized(Exchange& exchange);
// Whether `candidate` is the server's API key (compared in constant time); true when the server
// has none.
[[nodiscard]] bool api_key_matches(const ApiState& state, std::string_view candidate);

// The HTTP answer to a pipeline error: 400 invalid_argument / out_of_range, 404 not_found, 429
// resource_exhausted, 503 unavailable, 504 deadline_exceeded, 499-like client aborts as 503
// (the server stopping), 500 otherwise; the message is the stage's.
[[nodiscard]] openai::ProtocolError pipeline_error(const Error& error);

// A 500 for output of the pipeline that breaks the client output protocol or cannot be encoded
// (the stage's fault, not the client's).
[[nodiscard]] openai::ProtocolError output_error(const Error& error);

// Appends `audio` to `into`, resampling it to `into`'s rate; a different channel count is an
// error (non-streamed responses collect every audio delta this way).
[[nodiscard]] Status append_audio(media::AudioBuffer& into, const media::AudioBuffer& audio);

// The client output protocol's log probabilities in the OpenAI layer's form.
[[nodiscard]] std::vector<openai::TokenLogprob> openai_logprobs(
    const std::vector<client::TokenLogprob>& logprobs);

// 404 when `model` is neither empty nor the served model's name.
[[nodiscard]] openai::ProtocolStatus check_model(const ApiState& state, const std::string& model);

// Request options of a generation request (the deadline).
[[nodiscard]] pipeline::RequestOptions request_options(const ApiState& state);

// A number for ids (completion_id / audio_id): unique in this process, not guessable.
[[nodiscard]] std::uint64_t next_id_seed(ApiState& state);

// The start every endpoint with a body shares: the API key, the body parsed by `parse` (a
// function of the body text returning a ProtocolResult of a request with a `model` field), and
// the model name. The request, or nullopt when an answer (401, 400, 404) was already given.
template <class Parse>
auto accept_request(Exchange& exchange, Parse parse)
    -> std::optional<typename decltype(parse(std::string_view{}))::value_type> {
    if (!authorized(exchange)) return std::nullopt;
    auto request = parse(std::string_view(exchange.request().body));
    if (!request) {
        exchange.respond_error(request.error());
        return std::nullopt;
    }
    if (auto model = check_model(exchange.state(), request->model); !model) {
        exchange.respond_error(model.error());
        return std::nullopt;
    }
    return std::move(*request);
}

// Generation slots (--max-concurrency) and the queue before them (--max-queue); admission.cpp.
// Runs `proceed` with the exchange holding a slot: at once when one is free, otherwise later, on
// the work pool, when one frees up (first come, first served). A full queue is a 429 with
// Retry-After, answered here. A queued client that disconnects leaves the queue.
void admit(std::unique_ptr<Exchange> exchange,
           std::function<void(std::unique_ptr<Exchange>)> proceed);
// A slot without queueing (realtime responses): false when none is free.
[[nodiscard]] bool try_acquire_slot(ApiState& state);
// Gives a slot back: to the first request waiting, or to the pool. `seconds` (>= 0) is how long
// the generation held it (for Retry-After estimates); negative: not counted.
void release_slot(ApiState& state, double seconds);

// Endpoint registration, one per file.
[[nodiscard]] Status add_info_routes(ApiState& state);
[[nodiscard]] Status add_chat_route(ApiState& state);
[[nodiscard]] Status add_speech_route(ApiState& state);
[[nodiscard]] Status add_completion_route(ApiState& state);
[[nodiscard]] Status add_tokenize_routes(ApiState& state);
[[nodiscard]] Status add_realtime_route(ApiState& state);
[[nodiscard]] Status add_playground_routes(ApiState& state);

}  // namespace omnirt::serve::api

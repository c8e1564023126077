// GET /v1/realtime: the realtime voice API (docs/realtime.md). One realtime::Session per
// WebSocket; its responses run on the pipeline through the client like chat completions.
//
// The API key comes as "Authorization: Bearer KEY" or, from browsers (which cannot set
// headers on a WebSocket), as the subprotocol "openai-insecure-api-key.KEY". The beta protocol
// is chosen with "OpenAI-Beta: realtime=v1" or the subprotocol "openai-beta.realtime-v1".
#include <atomic>
#include <cstdio>
#include <random>

#include "client/output.h"
#include "serve/api/api_internal.h"
#include "serve/http/websocket.h"
#include "serve/realtime/realtime_session.h"

namespace omnirt::serve::api {
namespace {

constexpr std::string_view kKeyProtocol = "openai-insecure-api-key.";
constexpr std::string_view kBetaProtocol = "openai-beta.realtime-v1";

std::vector<std::string> offered_protocols(const http::HttpHeaders& headers) {
    std::vector<std::string> out;
    auto it = headers.find("sec-websocket-protocol");
    if (it == headers.end()) return out;
    std::string current;
    for (char c : it->second + ",") {
        if (c == ',') {
            if (!current.empty()) out.push_back(current);
            current.clear();
        } else if (c != ' ' && c != '\t') {
            current += c;
        }
    }
    return out;
}

std::string random_hex(std::size_t digits) {
    static thread_local std::mt19937_64 engine{std::random_device{}()};
    std::string out;
    while (out.size() < digits) {
        char chunk[17];
        std::snprintf(chunk, sizeof(chunk), "%016llx", static_cast<unsigned long long>(engine()));
        out += chunk;
    }
    out.resize(digits);
    return out;
}

// The pipeline behind a session's responses: one request per response, under the server's
// concurrency limit.
class PipelineBackend final : public realtime::ResponseBackend {
  public:
    explicit PipelineBackend(ApiState& state) : state_(state) {}

    Status start(const std::string& response_id, const openai::ChatRequest& request,
                 Events events) override {
        if (!try_acquire_slot(state_)) {
            return fail(ErrorCode::resource_exhausted,
                        "too many concurrent requests: the server takes at most " +
                            std::to_string(state_.options.max_concurrency) +
                            " at once (--max-concurrency)");
        }
        state_.metrics.request_started();
        auto call = std::make_shared<Call>(std::move(events));
        ApiState* state = &state_;
        client::Client* client = &state_.client;
        Status started = state_.client.start(
            response_id, openai::to_omni_request(request), request_options(state_),
            [state, client, call, response_id, begun = Clock::now()](pipeline::RequestEvent event) {
                if (!event.terminal()) {
                    auto delta = client::parse_chunk(event.chunk);
                    if (!delta) {
                        call->end(unexpected<Error>(delta.error()));
                        (void)client->abort(response_id, delta.error().message);
                        return;
                    }
                    call->delta(*delta);
                    return;
                }
                state->metrics.request_ended();
                release_slot(*state, std::chrono::duration<double>(Clock::now() - begun).count());
                state->metrics.record_request(
                    "/v1/realtime",
                    event.kind == pipeline::RequestEvent::Kind::completed ? 200 : 499,
                    std::chrono::duration<double>(Clock::now() - begun).count());
                if (event.kind != pipeline::RequestEvent::Kind::completed) {
                    call->end(unexpected<Error>(event.error));
                    return;
                }
                auto result = client::parse_result(event.result.data);
                if (!result) {
                    call->end(unexpected<Error>(result.error()));
                    return;
                }
                call->end(std::move(*result));
            });
        if (!started) {
            release_slot(state_, -1);
            state_.metrics.request_ended();
        }
        return started;
    }

    void cancel(const std::string& response_id, const std::string& reason) override {
        (void)state_.client.abort(response_id, reason);
    }

  private:
    // The session's events, ended once (a malformed chunk ends it before the terminal event).
    struct Call {
        explicit Call(Events events_in) : events(std::move(events_in)) {}
        void delta(const client::OutputDelta& delta) {
            if (!ended.load()) events.delta(delta);
        }
        void end(const Result<client::FinalOutput>& end) {
            if (!ended.exchange(true)) events.end(end);
        }
        Events events;
        std::atomic<bool> ended{false};
    };

    ApiState& state_;
};

http::WebSocketAccept open_session(ApiState& state,
                                   const std::shared_ptr<http::WebSocket>& socket) {
    const http::HttpRequest& request = socket->request();
    http::WebSocketAccept accept;
    auto protocols = offered_protocols(request.headers);
    bool key_ok = state.options.api_key.empty();
    if (auto it = request.headers.find("authorization"); it != request.headers.end()) {
        constexpr std::string_view kBearer = "Bearer ";
        if (it->second.rfind(kBearer, 0) == 0) {
            key_ok = key_ok || api_key_matches(state, std::string_view(it->second).substr(7));
        }
    }
    bool beta = false;
    if (auto it = request.headers.find("openai-beta"); it != request.headers.end()) {
        beta = it->second.find("realtime=v1") != std::string::npos;
    }
    for (const std::string& protocol : protocols) {
        if (protocol.rfind(kKeyProtocol, 0) == 0) {
            key_ok = key_ok ||
                     api_key_matches(state, std::string_view(protocol).substr(kKeyProtocol.size()));
        } else if (protocol == kBetaProtocol) {
            beta = true;
        } else if (accept.subprotocol.empty() || protocol == "realtime") {
            accept.subprotocol = protocol;
        }
    }
    if (!key_ok) {
        accept.refuse_status = 401;
        accept.refuse_message =
            "missing or incorrect API key: send 'Authorization: Bearer <key>' "
            "or the subprotocol 'openai-insecure-api-key.<key>'";
        return accept;
    }
    // ?model=NAME, when given, must be the served model.
    for (std::size_t start = 0; start <= request.query.size();) {
        std::size_t end = request.query.find('&', start);
        if (end == std::string::npos) end = request.query.size();
        std::string_view pair(request.query.data() + start, end - start);
        if (pair.rfind("model=", 0) == 0) {
            if (auto model = check_model(state, std::string(pair.substr(6))); !model) {
                accept.refuse_status = 404;
                accept.refuse_message = model.error().message;
                return accept;
            }
        }
        start = end + 1;
    }
    if (state.realtime_sessions.fetch_add(1) + 1 > state.options.max_realtime_sessions) {
        state.realtime_sessions.fetch_sub(1);
        accept.refuse_status = 429;
        accept.refuse_message = "too many realtime sessions: the server holds at most " +
                                std::to_string(state.options.max_realtime_sessions);
        return accept;
    }
    realtime::SessionOptions options;
    options.model_name = state.options.model_name;
    options.choices.voices = state.options.voices;
    options.vad = state.options.vad;
    options.limits = {state.options.limits, state.options.media};
    options.beta = beta;
    options.id_seed = random_hex(12) + "_";
    auto backend = std::make_shared<PipelineBackend>(state);
    // The socket's callbacks own the session, the session owns the socket: the HTTP layer drops
    // the callbacks once the connection ended, which frees both.
    auto session = std::make_shared<realtime::Session>(
        std::move(options), *backend,
        [socket](std::string event) { (void)socket->send_text(std::move(event)); });
    accept.callbacks.on_message = [session, backend](std::string message, bool binary) {
        if (binary) {
            session->on_binary();
        } else {
            session->on_message(message);
        }
    };
    ApiState* s = &state;
    accept.callbacks.on_close = [session, backend, s](int, std::string) {
        session->close();
        s->realtime_sessions.fetch_sub(1);
    };
    session->open();
    return accept;
}

}  // namespace

Status add_realtime_route(ApiState& state) {
    ApiState* s = &state;
    http::WebSocketOptions options;
    // Appends carry base64 audio: a minute of pcm16 at 24 kHz is about 3.8 MB.
    options.max_message_bytes = 16u << 20;
    options.max_queued_bytes = 32u << 20;
    return state.http->add_websocket_route(
        "/v1/realtime",
        [s](std::shared_ptr<http::WebSocket> socket) { return open_session(*s, socket); }, options);
}

}  // namespace omnirt::serve::api

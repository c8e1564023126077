// ApiServer: construction, the shared answer helpers, start / drain / stop.
#include "serve/api/api_server.h"

#include <random>

#include "serve/api/api_internal.h"
#include "serve/openai/responses.h"

namespace omnirt::serve::api {

Exchange::Exchange(ApiState& state, std::shared_ptr<http::HttpExchange> http, std::string endpoint)
    : state_(state),
      http_(std::move(http)),
      endpoint_(std::move(endpoint)),
      arrival_(Clock::now()) {}

Exchange::~Exchange() {
    // Unanswered: the client left (499, as proxies log it), or the HTTP layer answers 500. A
    // stream that never finished counts as the client leaving when it did.
    if (!recorded_) record(http_->disconnected() ? 499 : (streaming_ ? 200 : 500));
    if (admitted_) {
        state_.metrics.request_ended();
        release_slot(state_, std::chrono::duration<double>(Clock::now() - admitted_at_).count());
    }
}

double Exchange::seconds_since_arrival() const {
    return std::chrono::duration<double>(Clock::now() - arrival_).count();
}

void Exchange::record(int status) {
    if (recorded_) return;
    recorded_ = true;
    state_.metrics.record_request(endpoint_, status, seconds_since_arrival());
}

bool Exchange::respond(int status, std::string_view content_type, std::string body,
                       http::HttpHeaders extra) {
    record(status);
    return http_->respond(status, content_type, std::move(body), std::move(extra));
}

bool Exchange::respond_json(int status, std::string body) {
    return respond(status, "application/json", std::move(body));
}

bool Exchange::respond_error(const openai::ProtocolError& error) {
    return respond_json(error.http_status, openai::error_json(error));
}

bool Exchange::start_sse() {
    streaming_ = true;  // recorded when it finishes: the latency covers the whole stream
    return http_->start_stream(200, "text/event-stream",
                               {{"cache-control", "no-cache"}, {"x-accel-buffering", "no"}});
}

bool Exchange::start_stream(std::string_view content_type) {
    streaming_ = true;
    return http_->start_stream(200, content_type,
                               {{"cache-control", "no-cache"}, {"x-accel-buffering", "no"}});
}

bool Exchange::write(std::string chunk) { return http_->write(std::move(chunk)); }

bool Exchange::finish() {
    bool finished = http_->finish();
    record(finished || !http_->disconnected() ? 200 : 499);
    return finished;
}

void Exchange::hold_slot() {
    admitted_ = true;
    admitted_at_ = Clock::now();
    state_.metrics.request_started();
}

namespace {

// Compares without an early exit, so the time taken does not tell how much of a guess matched.
bool constant_time_equal(std::string_view a, std::string_view b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
    }
    return diff == 0;
}

}  // namespace

bool api_key_matches(const ApiState& state, std::string_view candidate) {
    const std::string& key = state.options.api_key;
    return key.empty() || constant_time_equal(candidate, key);
}

bool authorized(Exchange& exchange) {
    const std::string& key = exchange.state().options.api_key;
    if (key.empty()) return true;
    const auto& headers = exchange.request().headers;
    auto it = headers.find("authorization");
    if (it != headers.end() && constant_time_equal(it->second, "Bearer " + key)) return true;
    exchange.respond_error({401,
                            it == headers.end() ? "missing API key: send 'Authorization: Bearer "
                                                  "<key>'"
                                                : "incorrect API key",
                            "invalid_request_error", "", "invalid_api_key"});
    return false;
}

openai::ProtocolError pipeline_error(const Error& error) {
    switch (error.code) {
        case ErrorCode::invalid_argument:
        case ErrorCode::out_of_range:
            return {400, error.message, "invalid_request_error", "", ""};
        case ErrorCode::not_found:
            return {404, error.message, "invalid_request_error", "", ""};
        case ErrorCode::resource_exhausted:
            return {429, error.message, "rate_limit_error", "", "resource_exhausted"};
        case ErrorCode::unavailable:
        case ErrorCode::aborted:
            return {503, error.message, "server_error", "", "unavailable"};
        case ErrorCode::deadline_exceeded:
            return {504, error.message, "server_error", "", "timeout"};
        default:
            return {500, error.message, "server_error", "", ""};
    }
}

openai::ProtocolError output_error(const Error& error) {
    return {500, "the pipeline's output could not be turned into a response: " + error.message,
            "server_error", "", ""};
}

Status append_audio(media::AudioBuffer& into, const media::AudioBuffer& audio) {
    if (into.samples.empty()) {
        into = audio;
        return {};
    }
    if (audio.channels != into.channels) {
        return fail(ErrorCode::invalid_argument, "audio output changed its channel count from " +
                                                     std::to_string(into.channels) + " to " +
                                                     std::to_string(audio.channels));
    }
    if (audio.sample_rate == into.sample_rate) {
        into.samples.insert(into.samples.end(), audio.samples.begin(), audio.samples.end());
        return {};
    }
    OMNI_TRY(auto resampled, media::resample(audio, into.sample_rate));
    into.samples.insert(into.samples.end(), resampled.samples.begin(), resampled.samples.end());
    return {};
}

std::vector<openai::TokenLogprob> openai_logprobs(
    const std::vector<client::TokenLogprob>& logprobs) {
    std::vector<openai::TokenLogprob> out;
    out.reserve(logprobs.size());
    for (const client::TokenLogprob& entry : logprobs) {
        out.push_back(openai::TokenLogprob{.token = entry.token,
                                           .logprob = entry.logprob,
                                           .bytes = entry.bytes,
                                           .top = openai_logprobs(entry.top)});
    }
    return out;
}

openai::ProtocolStatus check_model(const ApiState& state, const std::string& model) {
    if (model.empty() || model == state.options.model_name) return {};
    return unexpected<openai::ProtocolError>(
        openai::ProtocolError{404,
                              "the model '" + model + "' does not exist; this server serves '" +
                                  state.options.model_name + "'",
                              "invalid_request_error", "model", "model_not_found"});
}

pipeline::RequestOptions request_options(const ApiState& state) {
    pipeline::RequestOptions options;
    if (state.options.request_timeout.count() > 0) {
        options.deadline = std::chrono::system_clock::now() + state.options.request_timeout;
    }
    return options;
}

std::uint64_t next_id_seed(ApiState& state) {
    static const std::uint64_t salt =
        (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    return salt ^ (state.id_counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
}

ApiServer::ApiServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

ApiServer::~ApiServer() { stop(); }

Result<std::unique_ptr<ApiServer>> ApiServer::create(ApiServerOptions options,
                                                     client::Client& client) {
    if (options.model_name.empty()) {
        return fail(ErrorCode::invalid_argument, "api server: model_name must not be empty");
    }
    options.http.max_body_bytes = options.limits.max_body_bytes;
    options.http.error_body = [](int status, std::string_view message) {
        return openai::error_json({status, std::string(message),
                                   status >= 500 ? "server_error" : "invalid_request_error", "",
                                   ""});
    };
    auto state = std::make_unique<State>(std::move(options), client);
    OMNI_TRY(state->http, http::HttpServer::create(state->options.http));
    state->pool = std::make_unique<WorkPool>(state->options.worker_threads);
    OMNI_RETURN_IF_ERROR(add_info_routes(*state));
    OMNI_RETURN_IF_ERROR(add_chat_route(*state));
    OMNI_RETURN_IF_ERROR(add_speech_route(*state));
    OMNI_RETURN_IF_ERROR(add_completion_route(*state));
    OMNI_RETURN_IF_ERROR(add_tokenize_routes(*state));
    OMNI_RETURN_IF_ERROR(add_realtime_route(*state));
    OMNI_RETURN_IF_ERROR(add_playground_routes(*state));
    return std::unique_ptr<ApiServer>(new ApiServer(std::move(state)));
}

Status ApiServer::start() { return state_->http->start(); }

std::uint16_t ApiServer::port() const { return state_->http->port(); }

Status ApiServer::drain(std::chrono::milliseconds timeout) { return state_->http->drain(timeout); }

void ApiServer::stop() {
    if (state_->http) state_->http->stop();
}

const ServerMetrics& ApiServer::metrics() const { return state_->metrics; }

}  // namespace omnirt::serve::api

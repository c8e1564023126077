// POST /v1/audio/speech: raw audio in the requested format, or SSE speech.audio.delta events.
// The text of the request is spoken by the pipeline; only its audio reaches the client.
#include <mutex>

#include "client/audio_output.h"
#include "client/output.h"
#include "serve/api/api_internal.h"
#include "serve/api/output_timing.h"
#include "serve/openai/responses.h"
#include "serve/openai/speech_request.h"

namespace omnirt::serve::api {
namespace {

using pipeline::RequestEvent;

class SpeechCall : public std::enable_shared_from_this<SpeechCall> {
  public:
    SpeechCall(std::unique_ptr<Exchange> exchange, openai::SpeechRequest request,
               media::AudioFormat format)
        : exchange_(std::move(exchange)),
          request_(std::move(request)),
          format_(format),
          encoder_(format),
          timing_(exchange_->state().metrics) {
        id_ = "speech-" + openai::completion_id(next_id_seed(exchange_->state())).substr(9);
    }

    void run() {
        ApiState& state = exchange_->state();
        auto self = shared_from_this();
        Status started =
            state.client.start(id_, openai::to_omni_request(request_), request_options(state),
                               [self](RequestEvent event) { self->on_event(event); });
        if (!started) {
            exchange_->respond_error(pipeline_error(started.error()));
            return;
        }
        client::Client* client = &state.client;
        std::string id = id_;
        exchange_->http().on_disconnect(
            [client, id] { (void)client->abort(id, "the client disconnected"); });
        if (request_.stream) {
            std::lock_guard lock(mutex_);
            ensure_head();
        }
    }

  private:
    void on_event(RequestEvent& event) {
        if (!event.terminal()) {
            std::lock_guard lock(mutex_);
            on_chunk(event);
            return;
        }
        auto self = shared_from_this();
        (void)exchange_->state().pool->post([self, event = std::move(event)]() mutable {
            std::lock_guard lock(self->mutex_);
            self->on_end(event);
        });
    }

    void ensure_head() {
        if (head_sent_) return;
        head_sent_ = true;
        exchange_->start_sse();
    }

    void on_chunk(const RequestEvent& event) {
        auto delta = client::parse_chunk(event.chunk);
        if (!delta) {
            fail(delta.error());
            return;
        }
        if (!delta->audio) return;
        timing_.audio();
        if (!request_.stream) {
            if (auto appended = append_audio(audio_, *delta->audio); !appended) {
                fail(appended.error());
            }
            return;
        }
        ensure_head();
        auto bytes = encoder_.push(*delta->audio);
        if (!bytes) {
            fail(bytes.error());
            return;
        }
        write_audio(*bytes);
    }

    void write_audio(const std::string& bytes) {
        if (bytes.empty()) return;
        exchange_->write(openai::speech_audio_delta_event(
            std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())));
    }

    void fail(const Error& error) {
        if (failed_) return;
        failed_ = true;
        (void)exchange_->state().client.abort(id_, error.message);
        send_error(output_error(error));
    }

    void send_error(const openai::ProtocolError& error) {
        if (request_.stream && head_sent_) {
            exchange_->write(openai::error_event(error));
            exchange_->finish();
        } else {
            exchange_->respond_error(error);
        }
    }

    void on_end(RequestEvent& event) {
        if (failed_) return;
        if (event.kind != RequestEvent::Kind::completed) {
            if (event.kind == RequestEvent::Kind::aborted && exchange_->http().disconnected())
                return;
            send_error(pipeline_error(event.error));
            return;
        }
        auto result = client::parse_result(event.result.data);
        if (!result) {
            send_error(output_error(result.error()));
            return;
        }
        openai::Usage usage{result->usage.prompt_tokens, result->usage.completion_tokens};
        if (request_.stream) {
            ensure_head();
            if (!encoder_.started() && result->audio) {
                auto bytes = encoder_.push(*result->audio);
                if (bytes) write_audio(*bytes);
            }
            auto tail = encoder_.finish();
            if (!tail) {
                send_error(output_error(tail.error()));
                return;
            }
            write_audio(*tail);
            if (!encoder_.started()) {
                send_error({500, "the pipeline produced no audio for this request", "server_error",
                            "", ""});
                return;
            }
            exchange_->write(openai::speech_audio_done_event(usage));
            exchange_->finish();
            return;
        }
        const media::AudioBuffer& audio = result->audio ? *result->audio : audio_;
        if (audio.samples.empty()) {
            send_error(
                {500, "the pipeline produced no audio for this request", "server_error", "", ""});
            return;
        }
        auto encoded = media::encode_audio(audio, format_);
        if (!encoded) {
            send_error(output_error(encoded.error()));
            return;
        }
        exchange_->respond(200, openai::speech_content_type(request_.response_format),
                           std::move(*encoded));
    }

    std::unique_ptr<Exchange> exchange_;
    openai::SpeechRequest request_;
    media::AudioFormat format_;
    std::string id_;
    std::mutex mutex_;
    bool head_sent_ = false;
    bool failed_ = false;
    media::AudioBuffer audio_;
    client::AudioResponseEncoder encoder_;
    OutputTiming timing_;
};

void speech(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    auto exchange = std::make_unique<Exchange>(state, std::move(http), "/v1/audio/speech");
    if (!authorized(*exchange)) return;
    auto request = openai::parse_speech_request(exchange->request().body, state.options.limits);
    if (!request) {
        exchange->respond_error(request.error());
        return;
    }
    if (auto model = check_model(state, request->model); !model) {
        exchange->respond_error(model.error());
        return;
    }
    auto format = media::parse_audio_format(request->response_format);
    if (!format || !media::format_available(*format)) {
        exchange->respond_error({400,
                                 "response_format '" + request->response_format +
                                     "' cannot be produced by this server (its libsndfile "
                                     "cannot write it)",
                                 "invalid_request_error", "response_format", ""});
        return;
    }
    if (!exchange->admit()) return;
    auto call = std::make_shared<SpeechCall>(std::move(exchange), std::move(*request), *format);
    call->run();
}

}  // namespace

Status add_speech_route(ApiState& state) {
    ApiState* s = &state;
    return state.http->add_route("POST", "/v1/audio/speech",
                                 [s](auto http) { speech(*s, std::move(http)); });
}

}  // namespace omnirt::serve::api

// POST /v1/chat/completions: one ChatCall per request, fed by the pipeline's events.
//
// Streaming: the SSE head and the role chunk go out once the pipeline accepted the request (or
// with the first event, whichever is first); text deltas become `delta.content`, audio deltas
// `delta.audio.data` in the requested format; the end sends finish_reason, usage (when asked)
// and [DONE]. Non-streaming: the result (or, where the result lacks it, what the chunks carried)
// becomes one chat.completion. Ends run on the work pool (audio encoding); chunks are cheap and
// run on the coordinator's thread.
#include <mutex>

#include "client/audio_output.h"
#include "client/output.h"
#include "serve/api/api_internal.h"
#include "serve/api/output_timing.h"
#include "serve/openai/chat_request.h"
#include "serve/openai/responses.h"

namespace omnirt::serve::api {
namespace {

using pipeline::RequestEvent;

std::int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool has_modality(const openai::ChatRequest& request, std::string_view modality) {
    return std::find(request.modalities.begin(), request.modalities.end(), modality) !=
           request.modalities.end();
}

class ChatCall : public std::enable_shared_from_this<ChatCall> {
  public:
    ChatCall(std::unique_ptr<Exchange> exchange, openai::ChatRequest request,
             media::AudioFormat format)
        : exchange_(std::move(exchange)),
          request_(std::move(request)),
          encoder_(format),
          format_(format),
          timing_(exchange_->state().metrics) {
        ApiState& state = exchange_->state();
        context_ = {.id = openai::completion_id(next_id_seed(state)),
                    .created = unix_seconds(),
                    .model = state.options.model_name,
                    .include_usage = request_.include_usage};
        audio_id_ = openai::audio_id(next_id_seed(state));
    }

    // On the IO thread. Starts the request; answers the client itself on every path.
    void run() {
        ApiState& state = exchange_->state();
        auto self = shared_from_this();
        Status started = state.client.start(context_.id, openai::to_omni_request(request_),
                                            request_options(state),
                                            [self](RequestEvent event) { self->on_event(event); });
        if (!started) {
            exchange_->respond_error(pipeline_error(started.error()));
            return;
        }
        std::string id = context_.id;
        client::Client* client = &state.client;
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
        // The end (and its audio encoding) runs on the pool; no chunk of this request follows.
        auto self = shared_from_this();
        auto task = [self, event = std::move(event)]() mutable {
            std::lock_guard lock(self->mutex_);
            self->on_end(event);
        };
        // A closed pool (shutdown) drops the end; the HTTP layer answers the exchange 500.
        (void)exchange_->state().pool->post(std::move(task));
    }

    void ensure_head() {
        if (head_sent_) return;
        head_sent_ = true;
        exchange_->start_sse();
        exchange_->write(openai::chat_chunk_role(context_));
    }

    void on_chunk(const RequestEvent& event) {
        auto delta = client::parse_chunk(event.chunk);
        if (!delta) {
            fail(delta.error());
            return;
        }
        if (!delta->text.empty()) timing_.text();
        if (delta->audio) timing_.audio();
        if (!request_.stream) {
            text_ += delta->text;
            if (delta->audio) {
                if (auto appended = append_audio(audio_, *delta->audio); !appended) {
                    fail(appended.error());
                }
            }
            return;
        }
        ensure_head();
        if (!delta->text.empty()) {
            text_ += delta->text;
            if (has_modality(request_, "text")) {
                exchange_->write(openai::chat_chunk_content(context_, delta->text));
            } else {
                exchange_->write(openai::chat_chunk_audio(context_, audio_id_, {}, delta->text));
            }
        }
        if (delta->audio && request_.wants_audio()) {
            auto bytes = encoder_.push(*delta->audio);
            if (!bytes) {
                fail(bytes.error());
                return;
            }
            write_audio(*bytes);
        }
    }

    void write_audio(const std::string& bytes) {
        if (bytes.empty()) return;
        exchange_->write(openai::chat_chunk_audio(
            context_, audio_id_,
            std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())));
    }

    // A failure after the request started: the pipeline keeps nothing (abort), the client gets
    // an error (an SSE error event when streaming).
    void fail(const Error& error) {
        if (failed_) return;
        failed_ = true;
        (void)exchange_->state().client.abort(context_.id, error.message);
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
            if (event.kind == RequestEvent::Kind::aborted && exchange_->http().disconnected()) {
                return;  // the client left; nobody to tell
            }
            send_error(pipeline_error(event.error));
            return;
        }
        auto result = client::parse_result(event.result.data);
        if (!result) {
            send_error(output_error(result.error()));
            return;
        }
        std::string text = result->text.value_or(text_);
        std::string finish_reason = result->finish_reason.empty() ? "stop" : result->finish_reason;
        openai::Usage usage{result->usage.prompt_tokens, result->usage.completion_tokens};
        if (request_.stream) {
            ensure_head();
            // Text only the result carries (a stage that sent no text deltas) still goes out.
            if (text_.empty() && !text.empty()) {
                if (has_modality(request_, "text")) {
                    exchange_->write(openai::chat_chunk_content(context_, text));
                } else if (request_.wants_audio()) {
                    exchange_->write(openai::chat_chunk_audio(context_, audio_id_, {}, text));
                }
            }
            if (request_.wants_audio()) {
                // A result with audio but no audio chunks still reaches the client.
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
            }
            exchange_->write(openai::chat_chunk_finish(context_, finish_reason));
            if (request_.include_usage) exchange_->write(openai::chat_chunk_usage(context_, usage));
            exchange_->write(openai::sse_done());
            exchange_->finish();
            return;
        }
        openai::ChatCompletion completion{.id = context_.id,
                                          .created = context_.created,
                                          .model = context_.model,
                                          .finish_reason = finish_reason,
                                          .usage = usage};
        if (has_modality(request_, "text")) completion.content = text;
        if (request_.wants_audio()) {
            const media::AudioBuffer* audio = result->audio ? &*result->audio : &audio_;
            if (!audio->samples.empty()) {
                auto encoded = media::encode_audio(*audio, format_);
                if (!encoded) {
                    send_error(output_error(encoded.error()));
                    return;
                }
                completion.audio = openai::AudioOutput{
                    .id = audio_id_,
                    .data = std::vector<std::uint8_t>(encoded->begin(), encoded->end()),
                    .expires_at = unix_seconds() + 3600,
                    .transcript = result->transcript.empty() ? text : result->transcript};
            }
        }
        exchange_->respond_json(200, openai::chat_completion_json(completion));
    }

    std::unique_ptr<Exchange> exchange_;
    openai::ChatRequest request_;
    openai::ChunkContext context_;
    std::string audio_id_;
    std::mutex mutex_;  // the handler's head vs. the first event; events vs. the pool's end
    bool head_sent_ = false;
    bool failed_ = false;
    std::string text_;
    media::AudioBuffer audio_;  // non-streaming: audio deltas, for results without audio
    client::AudioResponseEncoder encoder_;
    media::AudioFormat format_;
    OutputTiming timing_;
};

void chat(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    auto exchange = std::make_unique<Exchange>(state, std::move(http), "/v1/chat/completions");
    if (!authorized(*exchange)) return;
    auto request = openai::parse_chat_request(exchange->request().body, state.options.limits,
                                              state.options.media);
    if (!request) {
        exchange->respond_error(request.error());
        return;
    }
    if (auto model = check_model(state, request->model); !model) {
        exchange->respond_error(model.error());
        return;
    }
    auto format = client::response_audio_format(request->audio_format);
    if (!format || (request->wants_audio() && !media::format_available(*format))) {
        exchange->respond_error(
            {400, "audio.format '" + request->audio_format + "' cannot be produced by this server",
             "invalid_request_error", "audio.format", ""});
        return;
    }
    if (!exchange->admit()) return;
    auto call = std::make_shared<ChatCall>(std::move(exchange), std::move(*request), *format);
    call->run();
}

}  // namespace

Status add_chat_route(ApiState& state) {
    ApiState* s = &state;
    return state.http->add_route("POST", "/v1/chat/completions",
                                 [s](auto http) { chat(*s, std::move(http)); });
}

}  // namespace omnirt::serve::api

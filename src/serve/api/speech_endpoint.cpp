// POST /v1/audio/speech: raw audio in the requested format, or SSE speech.audio.delta events.
// The text of the request is spoken by the pipeline; only its audio reaches the client.
#include "client/audio_output.h"
#include "client/output.h"
#include "serve/api/api_internal.h"
#include "serve/api/generation_call.h"
#include "serve/api/output_timing.h"
#include "serve/openai/responses.h"
#include "serve/openai/speech_request.h"

namespace omnirt::serve::api {
namespace {

class SpeechCall final : public GenerationCall {
  public:
    SpeechCall(std::unique_ptr<Exchange> exchange, std::string id, bool stream,
               media::AudioFormat format, std::string response_format)
        : GenerationCall(std::move(exchange), std::move(id), stream),
          format_(format),
          response_format_(std::move(response_format)),
          encoder_(format),
          timing_(this->exchange().state().metrics) {}

  private:
    void on_chunk(const client::OutputDelta& delta) override {
        if (!delta.audio) return;  // only audio reaches a speech client
        timing_.audio();
        if (!streaming()) {
            if (auto appended = append_audio(audio_, *delta.audio); !appended) {
                fail(appended.error());
            }
            return;
        }
        ensure_head();
        auto bytes = encoder_.push(*delta.audio);
        if (!bytes) {
            fail(bytes.error());
            return;
        }
        write_audio(*bytes);
    }

    void write_audio(const std::string& bytes) {
        if (bytes.empty()) return;
        exchange().write(openai::speech_audio_delta_event(
            std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())));
    }

    void on_result(const client::FinalOutput& result) override {
        const openai::ProtocolError no_audio{500, "the pipeline produced no audio for this request",
                                             "server_error", "", ""};
        if (streaming()) {
            ensure_head();
            if (!encoder_.started() && result.audio) {
                auto bytes = encoder_.push(*result.audio);
                if (bytes) write_audio(*bytes);
            }
            auto tail = encoder_.finish();
            if (!tail) {
                send_error(output_error(tail.error()));
                return;
            }
            write_audio(*tail);
            if (!encoder_.started()) {
                send_error(no_audio);
                return;
            }
            exchange().write(openai::speech_audio_done_event(
                {result.usage.prompt_tokens, result.usage.completion_tokens}));
            exchange().finish();
            return;
        }
        const media::AudioBuffer& audio = result.audio ? *result.audio : audio_;
        if (audio.samples.empty()) {
            send_error(no_audio);
            return;
        }
        auto encoded = media::encode_audio(audio, format_);
        if (!encoded) {
            send_error(output_error(encoded.error()));
            return;
        }
        exchange().respond(200, openai::speech_content_type(response_format_), std::move(*encoded));
    }

    media::AudioFormat format_;
    std::string response_format_;
    media::AudioBuffer audio_;  // non-streaming: the audio deltas, for results without audio
    client::AudioResponseEncoder encoder_;
    OutputTiming timing_;
};

void speech(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    auto exchange = std::make_unique<Exchange>(state, std::move(http), "/v1/audio/speech");
    auto request = accept_request(*exchange, [&](std::string_view body) {
        return openai::parse_speech_request(body, state.options.limits, state.options.media);
    });
    if (!request) return;
    auto format = media::parse_audio_format(request->response_format);
    if (!format || !media::format_available(*format)) {
        exchange->respond_error({400,
                                 "response_format '" + request->response_format +
                                     "' cannot be produced by this server (its libsndfile "
                                     "cannot write it)",
                                 "invalid_request_error", "response_format", ""});
        return;
    }
    admit(std::move(exchange), [&state, request = std::move(*request),
                                format = *format](std::unique_ptr<Exchange> admitted) mutable {
        std::string id = "speech-" + openai::completion_id(next_id_seed(state)).substr(9);
        bool stream = request.stream;
        std::string response_format = request.response_format;
        auto call = std::make_shared<SpeechCall>(std::move(admitted), std::move(id), stream, format,
                                                 std::move(response_format));
        call->run(openai::to_omni_request(request));
    });
}

}  // namespace

Status add_speech_route(ApiState& state) {
    ApiState* s = &state;
    return state.http->add_route("POST", "/v1/audio/speech",
                                 [s](auto http) { speech(*s, std::move(http)); });
}

}  // namespace omnirt::serve::api

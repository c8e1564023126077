// POST /v1/audio/speech: raw audio in the requested format, or SSE speech.audio.delta events.
// The text of the request is spoken by the pipeline; only its audio reaches the client. With
// ApiServerOptions::time_stretch_speech the server applies `speed` to that audio, keeping pitch
// (media/time_stretch.h): chunk by chunk as it streams, or the whole clip.
#include <cctype>
#include <chrono>
#include <cstdio>

#include "client/audio_output.h"
#include "client/output.h"
#include "media/time_stretch.h"
#include "serve/api/api_internal.h"
#include "serve/api/generation_call.h"
#include "serve/api/output_timing.h"
#include "serve/api/saved_voices.h"
#include "serve/openai/responses.h"
#include "serve/openai/speech_request.h"

namespace omnirt::serve::api {
namespace {

class SpeechCall final : public GenerationCall {
  public:
    // `speed` 1: the audio goes out as the pipeline made it. `references_param`: the field the
    // request's inputs.references came from ("references", "ref_audio" or "voice"). `raw`: a
    // stream of the encoded bytes themselves (stream_format "audio") instead of SSE events.
    SpeechCall(std::unique_ptr<Exchange> exchange, std::string id, bool stream, bool raw,
               media::AudioFormat format, std::string response_format, double speed,
               std::string references_param)
        : GenerationCall(std::move(exchange), std::move(id), stream || raw),
          raw_(raw),
          speed_(speed),
          references_param_(std::move(references_param)),
          format_(format),
          response_format_(std::move(response_format)),
          encoder_(format),
          timing_(this->exchange().state().metrics),
          started_(std::chrono::steady_clock::now()),
          sglang_sse_(!raw && this->exchange().state().options.sglang_speech_sse) {}

  private:
    // inputs.text -> input; inputs.references[i]<rest> -> references[i]<rest>, or the legacy
    // ref_audio / the saved voice that made the only reference.
    [[nodiscard]] std::string param_of(const Error& error) const override {
        const std::string& message = error.message;
        if (message.find("inputs.text") != std::string::npos) return "input";
        const std::string_view prefix = "inputs.references[";
        const std::size_t at = message.find(prefix);
        if (at == std::string::npos) return "";
        if (references_param_ != "references") return references_param_;
        std::size_t end = at + prefix.size();
        while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) {
            ++end;
        }
        if (end == at + prefix.size() || end >= message.size() || message[end] != ']') {
            return "references";
        }
        std::string param = message.substr(at + 7, end + 1 - (at + 7));  // references[i]
        for (std::string_view field : {".audio", ".vq_codes", ".text"}) {
            if (message.compare(end + 1, field.size(), field) == 0) param += field;
        }
        return param;
    }

    void on_chunk(client::OutputDelta& delta) override {
        if (!delta.audio) return;  // only audio reaches a speech client
        timing_.audio();
        if (!streaming()) {
            if (auto appended = append_audio(audio_, *delta.audio); !appended) {
                fail(appended.error());
            }
            return;
        }
        ensure_head();
        if (auto pushed = push_stretched(*delta.audio); !pushed) fail(pushed.error());
    }

    // Streaming: `audio` through the stretcher (at speed 1 as it is) into the encoder, and out.
    Status push_stretched(const media::AudioBuffer& audio) {
        const media::AudioBuffer* out = &audio;
        media::AudioBuffer stretched;
        if (speed_ != 1.0) {
            if (stretcher_ == nullptr) {
                OMNI_TRY(stretcher_,
                         media::TimeStretcher::create(speed_, audio.sample_rate, audio.channels));
                stretcher_sample_rate_ = audio.sample_rate;
            }
            media::AudioBuffer resampled;
            const media::AudioBuffer* in = &audio;
            if (audio.sample_rate != stretch_rate()) {  // a stage changed its rate midway
                OMNI_TRY(resampled, media::resample(audio, stretch_rate()));
                in = &resampled;
            }
            OMNI_TRY(stretched, stretcher_->push(*in));
            out = &stretched;
        }
        if (out->samples.empty()) return ok_status();
        return send_audio(*out);
    }

    // Streaming: `audio` (stretched) out as the stream's next bytes, or in SGLang-Omni's SSE form
    // as a whole file of its own.
    Status send_audio(const media::AudioBuffer& audio) {
        audio_sent_ = true;
        if (!sglang_sse_) {
            OMNI_TRY(std::string bytes, encoder_.push(audio));
            write_audio(bytes);
            return ok_status();
        }
        OMNI_TRY(std::string file, media::encode_audio(audio, format_));
        exchange().write(openai::sglang_speech_chunk_event(
            request_id(), chunks_sent_++,
            std::span(reinterpret_cast<const std::uint8_t*>(file.data()), file.size()),
            response_format_, openai::speech_content_type(response_format_), audio.sample_rate));
        return ok_status();
    }

    [[nodiscard]] double seconds_since_start() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    }

    // SGLang-Omni's engine time: the seconds its AR stage spent on the request (arrival there
    // to the last frame; not the preprocessing, the vocoder, the encoding), the pipeline's
    // usage.engine_time_s. Its benchmark client divides completion tokens by it (tokens/s). A
    // pipeline that does not report it: the seconds since the request was admitted.
    [[nodiscard]] double engine_seconds(const client::FinalOutput& result) const {
        return result.usage.engine_seconds.value_or(seconds_since_start());
    }

    // Streaming: the stretcher's last samples.
    Status finish_stretch() {
        if (stretcher_ == nullptr) return ok_status();
        OMNI_TRY(media::AudioBuffer tail, stretcher_->finish());
        if (tail.samples.empty()) return ok_status();
        return send_audio(tail);
    }

    [[nodiscard]] int stretch_rate() const { return stretcher_sample_rate_; }

    void open_stream() override {
        if (raw_) {
            exchange().start_stream(openai::speech_content_type(response_format_));
        } else {
            exchange().start_sse();
        }
    }

    // A raw byte stream has no place for an error: it ends short (the log has the reason).
    void write_stream_error(const openai::ProtocolError& error) override {
        if (!raw_) GenerationCall::write_stream_error(error);
    }

    void write_audio(const std::string& bytes) {
        if (bytes.empty()) return;
        if (raw_) {
            exchange().write(bytes);
            return;
        }
        exchange().write(openai::speech_audio_delta_event(
            std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())));
    }

    void on_result(const client::FinalOutput& result) override {
        const openai::ProtocolError no_audio{500, "the pipeline produced no audio for this request",
                                             "server_error", "", ""};
        if (streaming()) {
            ensure_head();
            if (!audio_sent_ && stretcher_ == nullptr && result.audio) {
                if (auto pushed = push_stretched(*result.audio); !pushed) {
                    send_error(output_error(pushed.error()));
                    return;
                }
            }
            if (auto stretched = finish_stretch(); !stretched) {
                send_error(output_error(stretched.error()));
                return;
            }
            if (sglang_sse_) {
                if (!audio_sent_) {
                    send_error(no_audio);
                    return;
                }
                exchange().write(openai::sglang_speech_done_event(
                    request_id(), chunks_sent_,
                    {result.usage.prompt_tokens, result.usage.completion_tokens},
                    engine_seconds(result)));
                exchange().finish();
                return;
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
            if (!raw_) {
                exchange().write(openai::speech_audio_done_event(
                    {result.usage.prompt_tokens, result.usage.completion_tokens}));
            }
            exchange().finish();
            return;
        }
        const media::AudioBuffer* audio = result.audio ? &*result.audio : &audio_;
        if (audio->samples.empty()) {
            send_error(no_audio);
            return;
        }
        media::AudioBuffer stretched;
        if (speed_ != 1.0) {
            auto done = media::time_stretch(*audio, speed_);
            if (!done) {
                send_error(output_error(done.error()));
                return;
            }
            stretched = std::move(*done);
            audio = &stretched;
        }
        auto encoded = media::encode_audio(*audio, format_);
        if (!encoded) {
            send_error(output_error(encoded.error()));
            return;
        }
        // The token counts and the engine time (engine_seconds) as SGLang-Omni's speech API
        // sends them; its benchmark client reads tokens/s from them. A streamed answer has the
        // counts in speech.audio.done.
        const auto& usage = result.usage;
        char engine_time[32];
        std::snprintf(engine_time, sizeof engine_time, "%.4f", engine_seconds(result));
        exchange().respond(
            200, openai::speech_content_type(response_format_), std::move(*encoded),
            {{"x-prompt-tokens", std::to_string(usage.prompt_tokens)},
             {"x-completion-tokens", std::to_string(usage.completion_tokens)},
             {"x-total-tokens", std::to_string(usage.prompt_tokens + usage.completion_tokens)},
             {"x-engine-time", engine_time}});
    }

    const bool raw_;
    const double speed_;
    const std::string references_param_;
    std::unique_ptr<media::TimeStretcher> stretcher_;  // streaming at speed != 1: from 1st chunk
    int stretcher_sample_rate_ = 0;
    media::AudioFormat format_;
    std::string response_format_;
    media::AudioBuffer audio_;  // non-streaming: the audio deltas, for results without audio
    client::AudioResponseEncoder encoder_;
    OutputTiming timing_;
    const std::chrono::steady_clock::time_point started_;  // the call's creation (admitted)
    const bool sglang_sse_;    // SSE in SGLang-Omni's form (ApiServerOptions::sglang_speech_sse)
    bool audio_sent_ = false;  // streaming: some audio went out
    std::int64_t chunks_sent_ = 0;  // SGLang-Omni SSE: its events' index
};

void speech(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    auto exchange = std::make_unique<Exchange>(state, std::move(http), "/v1/audio/speech");
    auto request = accept_request(*exchange, [&](std::string_view body) {
        return openai::parse_speech_request(body, state.options.limits, state.options.media);
    });
    if (!request) return;
    const bool had_references = !request->references.empty();
    auto references = resolve_speech_voice(request->voice, std::move(request->references),
                                           state.options.voices, state.options.saved_voices.get());
    if (!references) {
        exchange->respond_error(references.error());
        return;
    }
    request->references = std::move(*references);
    std::string references_param = "references";
    if (!had_references && !request->references.empty()) {
        references_param = "voice";
    } else if (request->legacy_reference) {
        references_param = "ref_audio";
    }
    auto format = media::parse_audio_format(request->response_format);
    if (!format || !media::format_available(*format)) {
        exchange->respond_error({400,
                                 "response_format '" + request->response_format +
                                     "' cannot be produced by this server (this build "
                                     "cannot write it)",
                                 "invalid_request_error", "response_format", ""});
        return;
    }
    admit(std::move(exchange), [&state, request = std::move(*request), format = *format,
                                references_param = std::move(references_param)](
                                   std::unique_ptr<Exchange> admitted) mutable {
        std::string id = "speech-" + openai::completion_id(next_id_seed(state)).substr(9);
        bool stream = request.stream;
        bool raw = request.stream_audio;
        std::string response_format = request.response_format;
        // The server stretches, so the pipeline is asked for audio at speed 1.
        double speed = 1.0;
        if (state.options.time_stretch_speech) std::swap(speed, request.speed);
        auto call = std::make_shared<SpeechCall>(std::move(admitted), std::move(id), stream, raw,
                                                 format, std::move(response_format), speed,
                                                 std::move(references_param));
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

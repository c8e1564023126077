// POST /v1/chat/completions: one ChatCall per request, fed by the pipeline's events.
//
// Streaming: the SSE head and the role chunk go out once the pipeline accepted the request (or
// with the first event, whichever is first); text deltas become `delta.content`, audio deltas
// `delta.audio.data` in the requested format; the end sends finish_reason, usage (when asked)
// and [DONE]. Non-streaming: the result (or, where the result lacks it, what the chunks carried)
// becomes one chat.completion. Chunks and the end run on the work pool, in order (audio
// encoding; GenerationCall).
#include <algorithm>
#include <cctype>

#include "client/audio_output.h"
#include "client/output.h"
#include "serve/api/api_internal.h"
#include "serve/api/generation_call.h"
#include "serve/api/output_timing.h"
#include "serve/openai/chat_request.h"
#include "serve/openai/responses.h"

namespace omnirt::serve::api {
namespace {

std::int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool has_modality(const openai::ChatRequest& request, std::string_view modality) {
    return std::find(request.modalities.begin(), request.modalities.end(), modality) !=
           request.modalities.end();
}

class ChatCall final : public GenerationCall {
  public:
    ChatCall(std::unique_ptr<Exchange> exchange, std::string id, openai::ChatRequest request,
             media::AudioFormat format)
        : GenerationCall(std::move(exchange), id, request.stream),
          request_(std::move(request)),
          encoder_(format),
          format_(format),
          timing_(this->exchange().state().metrics) {
        ApiState& state = this->exchange().state();
        context_ = {.id = std::move(id),
                    .created = unix_seconds(),
                    .model = state.options.model_name,
                    .include_usage = request_.include_usage};
        audio_id_ = openai::audio_id(next_id_seed(state));
    }

  private:
    void after_head() override { exchange().write(openai::chat_chunk_role(context_)); }

    void on_chunk(client::OutputDelta& delta) override {
        if (!delta.text.empty()) timing_.text();
        if (delta.audio) timing_.audio();
        text_ += delta.text;
        const bool with_logprobs = request_.logprobs && !delta.logprobs.empty();
        if (with_logprobs && !streaming()) {
            auto entries = openai_logprobs(delta.logprobs);
            logprobs_.insert(logprobs_.end(), entries.begin(), entries.end());
        }
        if (!streaming()) {
            if (delta.audio) {
                if (auto appended = append_audio(audio_, *delta.audio); !appended) {
                    fail(appended.error());
                }
            }
            return;
        }
        ensure_head();
        if (with_logprobs && has_modality(request_, "text")) {
            // The text and its tokens' log probabilities in one chunk (text may be "" while a
            // character is incomplete).
            exchange().write(
                openai::chat_chunk_content(context_, delta.text, openai_logprobs(delta.logprobs)));
        } else {
            write_text(delta.text);
        }
        if (delta.audio && request_.wants_audio()) {
            auto bytes = encoder_.push(*delta.audio);
            if (!bytes) {
                fail(bytes.error());
                return;
            }
            write_audio(*bytes);
        }
    }

    // Text goes out as content, or as the audio's transcript when only audio was asked for.
    void write_text(const std::string& text) {
        if (text.empty()) return;
        if (has_modality(request_, "text")) {
            exchange().write(openai::chat_chunk_content(context_, text));
        } else if (request_.wants_audio()) {
            exchange().write(openai::chat_chunk_audio(context_, audio_id_, {}, text));
        }
    }

    void write_audio(const std::string& bytes) {
        if (bytes.empty()) return;
        exchange().write(openai::chat_chunk_audio(
            context_, audio_id_,
            std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())));
    }

    void on_result(const client::FinalOutput& result) override {
        std::string text = result.text.value_or(text_);
        std::string finish_reason = result.finish_reason.empty() ? "stop" : result.finish_reason;
        openai::Usage usage{result.usage.prompt_tokens, result.usage.completion_tokens};
        if (streaming()) {
            ensure_head();
            // Text only the result carries (a stage that sent no text deltas) still goes out.
            if (text_.empty()) write_text(text);
            if (request_.wants_audio()) {
                // A result with audio but no audio chunks still reaches the client.
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
            }
            exchange().write(openai::chat_chunk_finish(context_, finish_reason));
            if (request_.include_usage) exchange().write(openai::chat_chunk_usage(context_, usage));
            exchange().write(openai::sse_done());
            exchange().finish();
            return;
        }
        openai::ChatCompletion completion{.id = context_.id,
                                          .created = context_.created,
                                          .model = context_.model,
                                          .finish_reason = finish_reason,
                                          .usage = usage};
        if (has_modality(request_, "text")) completion.content = text;
        if (request_.logprobs) {
            completion.logprobs = result.logprobs ? openai_logprobs(*result.logprobs) : logprobs_;
        }
        if (request_.wants_audio()) {
            const media::AudioBuffer& audio = result.audio ? *result.audio : audio_;
            if (!audio.samples.empty()) {
                auto encoded = media::encode_audio(audio, format_);
                if (!encoded) {
                    send_error(output_error(encoded.error()));
                    return;
                }
                completion.audio = openai::AudioOutput{
                    .id = audio_id_,
                    .data = std::vector<std::uint8_t>(encoded->begin(), encoded->end()),
                    .expires_at = unix_seconds() + 3600,
                    .transcript = result.transcript.empty() ? text : result.transcript};
            }
        }
        exchange().respond_json(200, openai::chat_completion_json(completion));
    }

    openai::ChatRequest request_;
    openai::ChunkContext context_;
    std::string audio_id_;
    std::string text_;                            // the text deltas so far
    std::vector<openai::TokenLogprob> logprobs_;  // non-streaming: the chunks' log probabilities
    media::AudioBuffer audio_;  // non-streaming: the audio deltas, for results without audio
    client::AudioResponseEncoder encoder_;
    media::AudioFormat format_;
    OutputTiming timing_;
};

void chat(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    auto exchange = std::make_unique<Exchange>(state, std::move(http), "/v1/chat/completions");
    auto request = accept_request(*exchange, [&](std::string_view body) {
        return openai::parse_chat_request(body, state.options.limits, state.options.media);
    });
    if (!request) return;
    auto format = client::response_audio_format(request->audio_format);
    if (!format || (request->wants_audio() && !media::format_available(*format))) {
        exchange->respond_error(
            {400, "audio.format '" + request->audio_format + "' cannot be produced by this server",
             "invalid_request_error", "audio.format", ""});
        return;
    }
    if (request->wants_audio() && !request->audio_voice.empty() && !state.options.voices.empty()) {
        std::string voice = request->audio_voice;
        std::transform(voice.begin(), voice.end(), voice.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        const auto& voices = state.options.voices;
        if (std::find(voices.begin(), voices.end(), voice) == voices.end()) {
            std::string known;
            for (const std::string& name : voices) known += (known.empty() ? "" : ", ") + name;
            exchange->respond_error(
                {400,
                 "unknown voice '" + request->audio_voice + "' (this model has: " + known + ")",
                 "invalid_request_error", "audio.voice", ""});
            return;
        }
    }
    admit(std::move(exchange), [&state, request = std::move(*request),
                                format = *format](std::unique_ptr<Exchange> admitted) mutable {
        OmniRequest omni = openai::to_omni_request(request);
        auto call = std::make_shared<ChatCall>(std::move(admitted),
                                               openai::completion_id(next_id_seed(state)),
                                               std::move(request), format);
        call->run(std::move(omni));
    });
}

}  // namespace

Status add_chat_route(ApiState& state) {
    ApiState* s = &state;
    return state.http->add_route("POST", "/v1/chat/completions",
                                 [s](auto http) { chat(*s, std::move(http)); });
}

}  // namespace omnirt::serve::api

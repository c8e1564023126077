// POST /v1/completions: one CompletionCall per request, fed by the pipeline's events.
//
// Streaming: the SSE head goes out once the pipeline accepted the request; each text delta
// (with its tokens' log probabilities when asked for) becomes one text_completion chunk; the end
// sends a chunk with finish_reason, the usage (when asked) and [DONE]. Non-streaming: the result
// (or, where it lacks them, what the chunks carried) becomes one text_completion.
#include "serve/api/api_internal.h"
#include "serve/api/generation_call.h"
#include "serve/api/output_timing.h"
#include "serve/openai/completion_request.h"
#include "serve/openai/responses.h"

namespace omnirt::serve::api {
namespace {

// Characters the tokens add to the text, counted over their bytes (a character split across
// tokens counts once), as text_completion_json counts text_offset.
std::int64_t characters(const std::vector<client::TokenLogprob>& tokens) {
    std::int64_t count = 0;
    for (const auto& token : tokens) {
        for (std::uint8_t byte : token.bytes) count += (byte & 0xC0) != 0x80 ? 1 : 0;
    }
    return count;
}

class CompletionCall final : public GenerationCall {
  public:
    CompletionCall(std::unique_ptr<Exchange> exchange, std::string id,
                   openai::CompletionRequest request)
        : GenerationCall(std::move(exchange), id, request.stream),
          request_(std::move(request)),
          timing_(this->exchange().state().metrics) {
        context_ = {.id = std::move(id),
                    .created = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count(),
                    .model = this->exchange().state().options.model_name,
                    .include_usage = request_.include_usage};
    }

  private:
    void on_chunk(client::OutputDelta& delta) override {
        if (!delta.text.empty()) timing_.text();
        const bool with_logprobs = request_.logprobs.has_value() && !delta.logprobs.empty();
        std::optional<std::vector<openai::TokenLogprob>> logprobs;
        if (with_logprobs) logprobs = openai_logprobs(delta.logprobs);
        const std::int64_t offset = offset_;
        offset_ += characters(delta.logprobs);
        text_ += delta.text;
        if (!streaming()) {
            if (logprobs) logprobs_.insert(logprobs_.end(), logprobs->begin(), logprobs->end());
            return;
        }
        if (delta.text.empty() && !logprobs) return;
        ensure_head();
        exchange().write(openai::text_completion_chunk(context_, delta.text, logprobs, offset));
    }

    void on_result(const client::FinalOutput& result) override {
        const std::string finish_reason =
            result.finish_reason.empty() ? "stop" : result.finish_reason;
        const openai::Usage usage{result.usage.prompt_tokens, result.usage.completion_tokens};
        if (streaming()) {
            ensure_head();
            // Text only the result carries (a stage that sent no text deltas) still goes out.
            if (text_.empty() && result.text && !result.text->empty()) {
                exchange().write(
                    openai::text_completion_chunk(context_, *result.text, std::nullopt, 0));
            }
            exchange().write(openai::text_completion_finish(context_, finish_reason));
            if (request_.include_usage) {
                exchange().write(openai::text_completion_usage(context_, usage));
            }
            exchange().write(openai::sse_done());
            exchange().finish();
            return;
        }
        openai::TextCompletion completion{.id = context_.id,
                                          .created = context_.created,
                                          .model = context_.model,
                                          .text = result.text.value_or(text_),
                                          .finish_reason = finish_reason,
                                          .usage = usage};
        if (request_.logprobs) {
            completion.logprobs = result.logprobs ? openai_logprobs(*result.logprobs) : logprobs_;
        }
        exchange().respond_json(200, openai::text_completion_json(completion));
    }

    openai::CompletionRequest request_;
    openai::ChunkContext context_;
    std::string text_;                            // the text deltas so far
    std::int64_t offset_ = 0;                     // text_offset of the next token
    std::vector<openai::TokenLogprob> logprobs_;  // non-streaming: the chunks' log probabilities
    OutputTiming timing_;
};

void completion(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    auto exchange = std::make_unique<Exchange>(state, std::move(http), "/v1/completions");
    auto request = accept_request(*exchange, [&](std::string_view body) {
        return openai::parse_completion_request(body, state.options.limits);
    });
    if (!request) return;
    admit(std::move(exchange),
          [&state, request = std::move(*request)](std::unique_ptr<Exchange> admitted) mutable {
              OmniRequest omni = openai::to_omni_request(request);
              auto call = std::make_shared<CompletionCall>(
                  std::move(admitted), openai::text_completion_id(next_id_seed(state)),
                  std::move(request));
              call->run(std::move(omni));
          });
}

}  // namespace

Status add_completion_route(ApiState& state) {
    ApiState* s = &state;
    return state.http->add_route("POST", "/v1/completions",
                                 [s](auto http) { completion(*s, std::move(http)); });
}

}  // namespace omnirt::serve::api

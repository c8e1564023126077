#pragma once
// TextRole: the ArRole of a text model (Qwen3 chat, a thinker that streams text and, optionally,
// hidden states to a talker). It is configured with functions rather than subclassed, so a model
// family wires its tokenizer in without a class of its own.
//
// Thread safety: as ArRole (engine thread only); the functions must be safe to call there.
#include <functional>
#include <string>
#include <vector>

#include "engine/ar_role.h"

namespace omnirt::engine {

// Appends to `text` the UTF-8 bytes token `token_id` adds to the output (possibly part of a
// character; nothing for a token that is not shown). An error fails the request.
using DetokenizeFn = std::function<Status(std::int32_t token_id, std::string& text)>;

// Builds the prompt's token ids of a request whose payload has no data.input_ids (e.g. renders a
// chat request and tokenizes it). An error fails the request.
using PrepareInputFn =
    std::function<Result<std::vector<std::int32_t>>(const StagePayload& payload)>;

// The stream targets of one request (a subset of the stage's), chosen when it arrives: e.g. a
// thinker streams to its talker only the requests that want audio.
using StreamTargetsFn =
    std::function<Result<std::vector<std::string>>(const StagePayload& payload)>;

// Adds what the payload holds besides the prompt (media embeddings, layer injections, rotary
// positions) to a request's setup. An error fails the request.
using ExtendSetupFn = std::function<Status(const StagePayload& payload, RequestSetup& setup)>;

// Adds a model's own fields to a token's stream chunks (e.g. what a talker needs besides the
// token id). An error fails the request.
using TokenFieldsFn =
    std::function<Status(ArSequence& sequence, const TokenStep& step, TokenFields& fields)>;

struct TextRoleOptions {
    DetokenizeFn detokenize;             // optional: without it no text, no stop strings
    PrepareInputFn prepare_input;        // optional: prompts without data.input_ids
    StreamTargetsFn stream_targets_for;  // optional: every request streams to every target
    ExtendSetupFn extend_setup;          // optional: after the prompt is read
    TokenFieldsFn token_fields;          // optional: after the hidden state
    // Each token's final hidden state goes to the stream targets as "hidden" (f32 [hidden]).
    bool stream_hidden = false;
};

class TextRole : public ArRole {
  public:
    explicit TextRole(TextRoleOptions options) : options_(std::move(options)) {}

    [[nodiscard]] Result<RequestSetup> open_request(const StagePayload& payload) override;
    [[nodiscard]] bool produces_text() const override {
        return static_cast<bool>(options_.detokenize);
    }
    [[nodiscard]] Status detokenize(std::int32_t token, std::string& text) override {
        return options_.detokenize(token, text);
    }
    [[nodiscard]] bool wants_hidden(const ArSequence& sequence) override;
    [[nodiscard]] Result<TokenFields> on_token(ArSequence& sequence,
                                               const TokenStep& step) override;

  private:
    TextRoleOptions options_;
};

}  // namespace omnirt::engine

#pragma once
// The prompt of a Qwen3 request as token ids: what the `qwen3.preprocess` stage computes and
// what `qwen3.thinker` computes itself when no preprocessing stage ran. No libtorch.
//
// Request layouts read (OmniRequest::inputs):
//   {"messages": [{"role", "content": str | [{"type": "text", "text"}...] | null}...]}
//       rendered with the Qwen3 ChatML template and the generation prompt, then tokenized
//   {"prompt": str}            tokenized as it is (no template; /v1/completions)
//   {"prompt": [int...]}       token ids as they are, each checked against the vocabulary
// Media parts (image, audio, video) are unimplemented here: they need the Qwen3-Omni encoders.
//
// Thread safety: pure functions (the tokenizer is used read-only).
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "models/qwen3/chat_format.h"
#include "text/chat_message.h"

namespace omnirt::text {
class Tokenizer;
}

namespace omnirt::models::qwen3 {

// inputs.messages as ChatMessages. invalid_argument naming the field ("inputs.messages[2].role")
// for a malformed entry; unimplemented for media parts unless `accept_media`, which keeps them
// as parts of their kind (a model with encoders reads their sources itself).
[[nodiscard]] Result<std::vector<text::ChatMessage>> parse_chat_messages(const Value& messages,
                                                                         bool accept_media = false);

// inputs.messages rendered with the Qwen3 ChatML template (and the generation prompt when
// asked). Errors as parse_chat_messages, prefixed with `who`.
[[nodiscard]] Result<std::string> render_chat_prompt(const Value& messages, bool enable_thinking,
                                                     bool add_generation_prompt,
                                                     const std::string& who);

// The prompt ids of `request` (layouts above). `who` starts error messages ("qwen3.preprocess").
// invalid_argument for a malformed or empty prompt or an id outside the tokenizer's vocabulary.
[[nodiscard]] Result<std::vector<std::int32_t>> qwen3_prompt_ids(const OmniRequest& request,
                                                                 const text::Tokenizer& tokenizer,
                                                                 bool enable_thinking,
                                                                 const std::string& who);

}  // namespace omnirt::models::qwen3

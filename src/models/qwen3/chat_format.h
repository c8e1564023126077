#pragma once
// ChatML prompt rendering for the Qwen3 family, byte for byte what Qwen3's Jinja chat template
// (tokenizer_config.json "chat_template", chat_template.cpp) renders for the features below,
// with Qwen3-Omni's multimodal placeholders. Takes the generic conversation of
// text/chat_message.h. Pure function, safe from any thread.
//
// Supported: system / user / assistant / tool messages, assistant reasoning (explicit
// reasoning_content or inline <think>...</think>), assistant tool calls with JSON-text
// arguments (rendered verbatim), the generation prompt and enable_thinking. Not supported: the
// template's `tools` list (function signatures in the system turn).
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "text/chat_message.h"

namespace omnirt::models::qwen3 {

// The single placeholder a media part renders as (the processor later expands its pad token
// to the number of embeddings):
//   image <|vision_start|><|image_pad|><|vision_end|>
//   video <|vision_start|><|video_pad|><|vision_end|>
//   audio <|audio_start|><|audio_pad|><|audio_end|>
// Empty for text.
[[nodiscard]] std::string_view placeholder(text::ContentKind kind);

struct ChatFormatOptions {
    // false adds an empty "<think>\n\n</think>\n\n" after the generation prompt (Qwen3's switch
    // for answering without reasoning).
    bool enable_thinking = true;
};

// Renders the conversation. Errors (invalid_argument, naming messages[i]): no messages;
// reasoning_content or tool_calls on a message that is not from the assistant.
[[nodiscard]] Result<std::string> format_chat(std::span<const text::ChatMessage> messages,
                                              bool add_generation_prompt,
                                              const ChatFormatOptions& options = {});

}  // namespace omnirt::models::qwen3

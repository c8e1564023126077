#pragma once
// ChatML prompt rendering for the Qwen3 family, byte for byte what Qwen3's Jinja chat template
// (tokenizer_config.json "chat_template") renders for the features below, with Qwen3-Omni's
// multimodal placeholders. Independent of the serve layer: callers map their request types to
// these structs. Pure function, safe from any thread.
//
// Supported: system / user / assistant / tool messages, assistant reasoning (explicit
// reasoning_content or inline <think>...</think>), assistant tool calls with JSON-text
// arguments, the generation prompt and enable_thinking. Not supported: the template's `tools`
// list (function signatures in the system turn).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace omnirt::text {

enum class ChatRole : std::uint8_t { system, user, assistant, tool };

// "system", "user", "assistant", "tool"; anything else: invalid_argument.
[[nodiscard]] Result<ChatRole> parse_chat_role(std::string_view name);
[[nodiscard]] std::string_view to_string(ChatRole role);

enum class ContentKind : std::uint8_t { text, image, audio, video };

struct ContentPart {
    ContentKind kind = ContentKind::text;
    std::string text;  // ContentKind::text only
};

// The single placeholder a media part renders as (the processor later expands its pad token
// to the number of embeddings):
//   image <|vision_start|><|image_pad|><|vision_end|>
//   video <|vision_start|><|video_pad|><|vision_end|>
//   audio <|audio_start|><|audio_pad|><|audio_end|>
// Empty for text.
[[nodiscard]] std::string_view placeholder(ContentKind kind);

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON text, rendered verbatim
};

struct ChatMessage {
    ChatRole role = ChatRole::user;
    std::vector<ContentPart> content;  // rendered in order, concatenated
    // Assistant only: the reasoning rendered inside <think>...</think>. When absent, a
    // "<think>...</think>" prefix of the content is taken as the reasoning, as the template does.
    std::optional<std::string> reasoning_content;
    std::vector<ToolCall> tool_calls;  // assistant only

    // A message whose content is one text part.
    [[nodiscard]] static ChatMessage text(ChatRole role, std::string text);
};

struct ChatFormatOptions {
    // false adds an empty "<think>\n\n</think>\n\n" after the generation prompt (Qwen3's switch
    // for answering without reasoning).
    bool enable_thinking = true;
};

// Renders the conversation. Errors (invalid_argument, naming messages[i]): no messages;
// reasoning_content or tool_calls on a message that is not from the assistant.
[[nodiscard]] Result<std::string> format_chat(std::span<const ChatMessage> messages,
                                              bool add_generation_prompt,
                                              const ChatFormatOptions& options = {});

}  // namespace omnirt::text

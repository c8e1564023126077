#pragma once
// A chat conversation as plain data, independent of any model's chat template: the serve layer
// maps its request types to these structs, and a model family's chat template renders them (the
// family registry, models/family.h, names the renderer of each family). Pure data and pure
// functions, safe from any thread.
#include <cstdint>
#include <optional>
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

struct ToolCall {
    std::string name;
    std::string arguments;  // JSON text
};

struct ChatMessage {
    ChatRole role = ChatRole::user;
    std::vector<ContentPart> content;  // in order
    // Assistant only: the reasoning, when the client sent it apart from the content.
    std::optional<std::string> reasoning_content;
    std::vector<ToolCall> tool_calls;  // assistant only

    // A message whose content is one text part.
    [[nodiscard]] static ChatMessage text(ChatRole role, std::string text);
};

}  // namespace omnirt::text

#include "text/chat_message.h"

namespace omnirt::text {

Result<ChatRole> parse_chat_role(std::string_view name) {
    if (name == "system") return ChatRole::system;
    if (name == "user") return ChatRole::user;
    if (name == "assistant") return ChatRole::assistant;
    if (name == "tool") return ChatRole::tool;
    return fail(ErrorCode::invalid_argument, "unknown chat role '" +
                                                 std::string(name.substr(0, 64)) +
                                                 "' (expected system, user, assistant or tool)");
}

std::string_view to_string(ChatRole role) {
    switch (role) {
        case ChatRole::system:
            return "system";
        case ChatRole::user:
            return "user";
        case ChatRole::assistant:
            return "assistant";
        case ChatRole::tool:
            return "tool";
    }
    return "user";
}

ChatMessage ChatMessage::text(ChatRole role, std::string text) {
    ChatMessage message;
    message.role = role;
    message.content.push_back(ContentPart{.kind = ContentKind::text, .text = std::move(text)});
    return message;
}

}  // namespace omnirt::text

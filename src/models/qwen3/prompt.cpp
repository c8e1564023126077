#include "models/qwen3/prompt.h"

#include <utility>

#include "text/tokenizer.h"

namespace omnirt::models::qwen3 {
namespace {

Error invalid(const std::string& who, std::string message) {
    return Error{ErrorCode::invalid_argument, who + ": " + std::move(message)};
}

Result<text::ContentPart> content_part(const Value& part, const std::string& where,
                                       bool accept_media) {
    const Value* type = part.find("type");
    if (type == nullptr || !type->is_string()) {
        return fail(ErrorCode::invalid_argument, where + " needs a string 'type'");
    }
    if (type->as_string() == "text") {
        const Value* text = part.find("text");
        if (text == nullptr || !text->is_string()) {
            return fail(ErrorCode::invalid_argument,
                        where + " (a text part) needs a string 'text'");
        }
        return text::ContentPart{.kind = text::ContentKind::text, .text = text->as_string()};
    }
    if (accept_media) {
        if (type->as_string() == "image")
            return text::ContentPart{.kind = text::ContentKind::image};
        if (type->as_string() == "audio")
            return text::ContentPart{.kind = text::ContentKind::audio};
        if (type->as_string() == "video")
            return text::ContentPart{.kind = text::ContentKind::video};
    }
    return fail(ErrorCode::unimplemented,
                where + " is a '" + type->as_string() +
                    "' part; this pipeline takes text only (media needs the Qwen3-Omni encoders)");
}

Result<std::vector<std::int32_t>> ids_from_list(const List& list, const text::Tokenizer& tokenizer,
                                                const std::string& who) {
    const auto vocab = static_cast<std::int64_t>(tokenizer.vocab_size());
    std::vector<std::int32_t> ids;
    ids.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::int64_t* id = list[i].if_int();
        if (id == nullptr || *id < 0 || *id >= vocab) {
            return fail(invalid(who, "inputs.prompt[" + std::to_string(i) +
                                         "] must be a token id in [0, " + std::to_string(vocab) +
                                         ")"));
        }
        ids.push_back(static_cast<std::int32_t>(*id));
    }
    return ids;
}

}  // namespace

Result<std::vector<text::ChatMessage>> parse_chat_messages(const Value& messages,
                                                           bool accept_media) {
    const List* list = messages.if_list();
    if (list == nullptr || list->empty()) {
        return fail(ErrorCode::invalid_argument, "inputs.messages must be a non-empty list");
    }
    std::vector<text::ChatMessage> out;
    out.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::string where = "inputs.messages[" + std::to_string(i) + "]";
        const Value& message = (*list)[i];
        const Value* role = message.find("role");
        if (role == nullptr || !role->is_string()) {
            return fail(ErrorCode::invalid_argument, where + " needs a string 'role'");
        }
        auto parsed_role = text::parse_chat_role(role->as_string());
        if (!parsed_role) {
            return fail(ErrorCode::invalid_argument,
                        where + ".role: " + parsed_role.error().message);
        }
        text::ChatMessage entry{.role = *parsed_role};
        const Value* content = message.find("content");
        if (content == nullptr || content->is_null()) {
            // An assistant turn without content (a tool call): renders empty.
        } else if (const std::string* plain = content->if_string()) {
            entry.content.push_back(text::ContentPart{.text = *plain});
        } else if (const List* parts = content->if_list()) {
            for (std::size_t k = 0; k < parts->size(); ++k) {
                OMNI_TRY(text::ContentPart part,
                         content_part((*parts)[k], where + ".content[" + std::to_string(k) + "]",
                                      accept_media));
                entry.content.push_back(std::move(part));
            }
        } else {
            return fail(ErrorCode::invalid_argument,
                        where + ".content must be a string or a list of parts");
        }
        out.push_back(std::move(entry));
    }
    return out;
}

Result<std::string> render_chat_prompt(const Value& messages, bool enable_thinking,
                                       bool add_generation_prompt, const std::string& who) {
    auto chat = parse_chat_messages(messages);
    if (!chat) return fail(chat.error().with_context(who));
    auto rendered = format_chat(*chat, add_generation_prompt, {.enable_thinking = enable_thinking});
    if (!rendered) return fail(invalid(who, rendered.error().message));
    return std::move(*rendered);
}

Result<std::vector<std::int32_t>> qwen3_prompt_ids(const OmniRequest& request,
                                                   const text::Tokenizer& tokenizer,
                                                   bool enable_thinking, const std::string& who) {
    std::string prompt;
    if (const Value* messages = request.inputs.find("messages"); messages && !messages->is_null()) {
        OMNI_TRY(prompt, render_chat_prompt(*messages, enable_thinking,
                                            /*add_generation_prompt=*/true, who));
    } else if (const Value* given = request.inputs.find("prompt"); given && !given->is_null()) {
        if (const List* list = given->if_list()) {
            if (list->empty()) return fail(invalid(who, "inputs.prompt is empty"));
            return ids_from_list(*list, tokenizer, who);
        }
        if (!given->is_string()) {
            return fail(invalid(who, "inputs.prompt must be a string or a list of token ids"));
        }
        if (given->as_string().empty()) return fail(invalid(who, "inputs.prompt is empty"));
        prompt = given->as_string();
    } else {
        return fail(invalid(who, "the request has no inputs.messages or inputs.prompt"));
    }
    auto ids = tokenizer.encode(prompt, text::EncodeOptions{});
    if (!ids) return fail(ids.error().with_context(who + ": tokenizing the prompt"));
    return std::vector<std::int32_t>(ids->begin(), ids->end());
}

}  // namespace omnirt::models::qwen3

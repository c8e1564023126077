// ChatML rendering that mirrors Qwen3's chat template statement by statement (see the comments
// quoting it), so that the golden tests can compare against the template rendered by Jinja.
#include "models/qwen3/chat_format.h"

namespace omnirt::models::qwen3 {
namespace {

using text::ChatMessage;
using text::ChatRole;
using text::ContentKind;
using text::ContentPart;
using text::ToolCall;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

std::string_view strip_leading_newlines(std::string_view text) {
    const std::size_t first = text.find_first_not_of('\n');
    return first == std::string_view::npos ? std::string_view() : text.substr(first);
}

std::string_view strip_trailing_newlines(std::string_view text) {
    const std::size_t last = text.find_last_not_of('\n');
    return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

std::string_view strip_newlines(std::string_view text) {
    return strip_trailing_newlines(strip_leading_newlines(text));
}

std::string render_content(const ChatMessage& message) {
    std::string out;
    for (const ContentPart& part : message.content) {
        if (part.kind == ContentKind::text) {
            out.append(part.text);
        } else {
            out.append(placeholder(part.kind));
        }
    }
    return out;
}

bool is_tool_response(std::string_view content) {
    return content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
}

// messages[i].content.split(separator)[-1] and [0] of Python / Jinja.
std::string_view after_last(std::string_view text, std::string_view separator) {
    const std::size_t found = text.rfind(separator);
    return found == std::string_view::npos ? text : text.substr(found + separator.size());
}
std::string_view before_first(std::string_view text, std::string_view separator) {
    const std::size_t found = text.find(separator);
    return found == std::string_view::npos ? text : text.substr(0, found);
}

void render_assistant(const ChatMessage& message, std::string_view full_content, bool after_query,
                      bool last, std::string& out) {
    // {%- set content = message.content %} {%- set reasoning_content = '' %}
    std::string_view content = full_content;
    std::string_view reasoning;
    if (message.reasoning_content.has_value()) {
        reasoning = *message.reasoning_content;
    } else if (full_content.find(kThinkClose) != std::string_view::npos) {
        // content = content.split('</think>')[-1].lstrip('\n')
        // reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        content = strip_leading_newlines(after_last(full_content, kThinkClose));
        reasoning = strip_leading_newlines(after_last(
            strip_trailing_newlines(before_first(full_content, kThinkClose)), kThinkOpen));
    }
    out.append("<|im_start|>assistant\n");
    if (after_query && (last || !reasoning.empty())) {
        out.append("<think>\n");
        out.append(strip_newlines(reasoning));
        out.append("\n</think>\n\n");
        out.append(strip_leading_newlines(content));
    } else {
        out.append(content);
    }
    for (std::size_t i = 0; i < message.tool_calls.size(); ++i) {
        // {%- if (loop.first and content) or (not loop.first) %} {{- '\n' }}
        if (i > 0 || !content.empty()) out.push_back('\n');
        const ToolCall& call = message.tool_calls[i];
        out.append("<tool_call>\n{\"name\": \"");
        out.append(call.name);
        out.append("\", \"arguments\": ");
        out.append(call.arguments);
        out.append("}\n</tool_call>");
    }
    out.append("<|im_end|>\n");
}

}  // namespace

std::string_view placeholder(text::ContentKind kind) {
    switch (kind) {
        case ContentKind::text:
            return "";
        case ContentKind::image:
            return "<|vision_start|><|image_pad|><|vision_end|>";
        case ContentKind::audio:
            return "<|audio_start|><|audio_pad|><|audio_end|>";
        case ContentKind::video:
            return "<|vision_start|><|video_pad|><|vision_end|>";
    }
    return "";
}

Result<std::string> format_chat(std::span<const text::ChatMessage> messages,
                                bool add_generation_prompt, const ChatFormatOptions& options) {
    if (messages.empty()) return fail(ErrorCode::invalid_argument, "messages: the list is empty");
    std::vector<std::string> contents;
    contents.reserve(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& message = messages[i];
        if (message.role != ChatRole::assistant &&
            (message.reasoning_content.has_value() || !message.tool_calls.empty())) {
            return fail(ErrorCode::invalid_argument,
                        "messages[" + std::to_string(i) +
                            "]: reasoning_content and tool_calls are only allowed on assistant "
                            "messages");
        }
        contents.push_back(render_content(message));
    }

    // The last user message that is not a wrapped tool response; assistant turns after it show
    // their reasoning. Without one, last_query_index stays at the last message.
    std::size_t last_query_index = messages.size() - 1;
    for (std::size_t i = messages.size(); i-- > 0;) {
        if (messages[i].role == ChatRole::user && !is_tool_response(contents[i])) {
            last_query_index = i;
            break;
        }
    }

    std::string out;
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& message = messages[i];
        const bool first = i == 0;
        const bool last = i + 1 == messages.size();
        switch (message.role) {
            case ChatRole::system:
            case ChatRole::user:
                out.append("<|im_start|>");
                out.append(text::to_string(message.role));
                out.push_back('\n');
                out.append(contents[i]);
                out.append("<|im_end|>\n");
                break;
            case ChatRole::assistant:
                render_assistant(message, contents[i], i > last_query_index, last, out);
                break;
            case ChatRole::tool:
                if (first || messages[i - 1].role != ChatRole::tool) out.append("<|im_start|>user");
                out.append("\n<tool_response>\n");
                out.append(contents[i]);
                out.append("\n</tool_response>");
                if (last || messages[i + 1].role != ChatRole::tool) out.append("<|im_end|>\n");
                break;
        }
    }
    if (add_generation_prompt) {
        out.append("<|im_start|>assistant\n");
        if (!options.enable_thinking) out.append("<think>\n\n</think>\n\n");
    }
    return out;
}

}  // namespace omnirt::models::qwen3

#include "models/qwen3_omni/chat_layout.h"

#include <array>
#include <string_view>

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::array<std::string_view, 7> kMediaTokens = {
    "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
    "<|audio_start|>",  "<|audio_end|>",  "<|audio_pad|>"};

}  // namespace

Result<OmniChatPrompt> format_omni_chat(std::span<const text::ChatMessage> messages,
                                        bool add_generation_prompt,
                                        const qwen3::ChatFormatOptions& options) {
    OmniChatPrompt out;
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const auto& content = messages[i].content;
        for (std::size_t j = 0; j < content.size(); ++j) {
            const text::ContentPart& part = content[j];
            if (part.kind != text::ContentKind::text) {
                out.media.push_back(part.kind);
                continue;
            }
            for (const std::string_view token : kMediaTokens) {
                if (part.text.find(token) != std::string::npos) {
                    return fail(ErrorCode::invalid_argument,
                                "messages[" + std::to_string(i) + "].content[" + std::to_string(j) +
                                    "]: text contains the special token " + std::string(token) +
                                    "; media must be sent as image, video or audio parts");
                }
            }
        }
    }
    OMNI_TRY(out.text, qwen3::format_chat(messages, add_generation_prompt, options));
    return out;
}

}  // namespace omnirt::models::qwen3_omni

#pragma once
// Qwen3-Omni's chat layout: a conversation (text/chat_message.h) rendered as ChatML with one
// placeholder triplet per media part, in the order the parts are given:
//   <|im_start|>system\n...<|im_end|>\n<|im_start|>user\n{parts}<|im_end|>\n...<|im_start|>assistant\n
// where an image part renders <|vision_start|><|image_pad|><|vision_end|>, a video part
// <|vision_start|><|video_pad|><|vision_end|>, an audio part
// <|audio_start|><|audio_pad|><|audio_end|> and a text part its text (qwen3::format_chat renders
// it; the layout is Qwen3's ChatML). Unlike SGLang-Omni, which moves the media of the last user
// message before its text, the parts keep the order the client gave (as the transformers chat
// template does). A video whose soundtrack is used (use_audio_in_video) is one video part: the
// soundtrack has no part. Pure function, safe from any thread.
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/qwen3/chat_format.h"
#include "text/chat_message.h"

namespace omnirt::models::qwen3_omni {

struct OmniChatPrompt {
    std::string text;
    // The media parts in prompt order (never ContentKind::text): the order in which the
    // media items (layout.h MediaItems, per kind) must be given to expand_placeholders.
    std::vector<text::ContentKind> media;
};

// Errors (invalid_argument naming messages[i].content[j]): those of qwen3::format_chat; a text
// part that contains one of the multimodal special tokens as text (<|vision_start|>,
// <|image_pad|>, ...), which would otherwise tokenize into a placeholder no media item backs.
[[nodiscard]] Result<OmniChatPrompt> format_omni_chat(std::span<const text::ChatMessage> messages,
                                                      bool add_generation_prompt,
                                                      const qwen3::ChatFormatOptions& options = {});

}  // namespace omnirt::models::qwen3_omni

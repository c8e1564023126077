// format_omni_chat: the ChatML text with one placeholder triplet per media part, in the order
// the parts are given, and the media order returned to the caller.
#include <gtest/gtest.h>

#include "models/qwen3_omni/chat_layout.h"

namespace omnirt::models::qwen3_omni {
namespace {

using text::ChatMessage;
using text::ChatRole;
using text::ContentKind;
using text::ContentPart;

ContentPart part(ContentKind kind, std::string text = {}) {
    return ContentPart{.kind = kind, .text = std::move(text)};
}

TEST(ChatLayout, MediaPartsKeepTheirOrder) {
    ChatMessage user{.role = ChatRole::user};
    user.content = {part(ContentKind::text, "Compare "),
                    part(ContentKind::image),
                    part(ContentKind::text, " with "),
                    part(ContentKind::video),
                    part(ContentKind::audio),
                    part(ContentKind::text, "?")};
    const std::vector<ChatMessage> messages = {
        ChatMessage::text(ChatRole::system, "You are Qwen-Omni."), user};
    const auto prompt = format_omni_chat(messages, true);
    ASSERT_TRUE(prompt.has_value()) << prompt.error().to_string();
    EXPECT_EQ(prompt->text,
              "<|im_start|>system\nYou are Qwen-Omni.<|im_end|>\n"
              "<|im_start|>user\nCompare <|vision_start|><|image_pad|><|vision_end|> with "
              "<|vision_start|><|video_pad|><|vision_end|>"
              "<|audio_start|><|audio_pad|><|audio_end|>?<|im_end|>\n"
              "<|im_start|>assistant\n");
    EXPECT_EQ(prompt->media, (std::vector<ContentKind>{ContentKind::image, ContentKind::video,
                                                       ContentKind::audio}));
}

TEST(ChatLayout, MultipleTurnsCollectMediaInPromptOrder) {
    ChatMessage first{.role = ChatRole::user};
    first.content = {part(ContentKind::audio), part(ContentKind::text, "Transcribe.")};
    ChatMessage second{.role = ChatRole::user};
    second.content = {part(ContentKind::image), part(ContentKind::image),
                      part(ContentKind::text, "And these?")};
    const std::vector<ChatMessage> messages = {
        first, ChatMessage::text(ChatRole::assistant, "Hello."), second};
    const auto prompt = format_omni_chat(messages, true);
    ASSERT_TRUE(prompt.has_value()) << prompt.error().to_string();
    EXPECT_EQ(prompt->text,
              "<|im_start|>user\n<|audio_start|><|audio_pad|><|audio_end|>Transcribe.<|im_end|>\n"
              "<|im_start|>assistant\nHello.<|im_end|>\n"
              "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
              "<|vision_start|><|image_pad|><|vision_end|>And these?<|im_end|>\n"
              "<|im_start|>assistant\n");
    EXPECT_EQ(prompt->media, (std::vector<ContentKind>{ContentKind::audio, ContentKind::image,
                                                       ContentKind::image}));
}

TEST(ChatLayout, TextOnlyIsQwen3ChatMl) {
    const std::vector<ChatMessage> messages = {ChatMessage::text(ChatRole::user, "Hi")};
    const auto prompt = format_omni_chat(messages, true);
    ASSERT_TRUE(prompt.has_value());
    EXPECT_EQ(prompt->text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_TRUE(prompt->media.empty());
}

TEST(ChatLayout, SpecialTokensInTextAreRefused) {
    ChatMessage user{.role = ChatRole::user};
    user.content = {part(ContentKind::image),
                    part(ContentKind::text, "fake <|image_pad|> placeholder")};
    const std::vector<ChatMessage> messages = {user};
    const auto prompt = format_omni_chat(messages, true);
    ASSERT_FALSE(prompt.has_value());
    EXPECT_EQ(prompt.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(prompt.error().message.find("messages[0].content[1]"), std::string::npos);
    EXPECT_FALSE(format_omni_chat({}, true).has_value());  // qwen3::format_chat's own check
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

// qwen3::format_chat: Qwen3's ChatML layout by hand-written expectations (the golden test compares
// against the real template rendered by Jinja).
#include <gtest/gtest.h>

#include "models/qwen3/chat_format.h"

namespace omnirt::models::qwen3 {
namespace {

using text::ChatMessage;
using text::ChatRole;
using text::ContentKind;

std::string render(const std::vector<ChatMessage>& messages, bool generation_prompt,
                   ChatFormatOptions options = {}) {
    auto text = format_chat(messages, generation_prompt, options);
    EXPECT_TRUE(text.has_value()) << text.error().to_string();
    return text.value_or("");
}

ChatMessage msg(ChatRole role, std::string text) {
    return ChatMessage::text(role, std::move(text));
}

TEST(ChatFormat, SystemUserAndGenerationPrompt) {
    const std::vector<ChatMessage> messages = {msg(ChatRole::system, "Be brief."),
                                               msg(ChatRole::user, "Hi")};
    EXPECT_EQ(render(messages, false),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    EXPECT_EQ(render(messages, true),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n");
}

TEST(ChatFormat, DisabledThinkingAddsAnEmptyThinkBlock) {
    EXPECT_EQ(render({msg(ChatRole::user, "Hi")}, true, {.enable_thinking = false}),
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    // Without a generation prompt the option changes nothing.
    EXPECT_EQ(render({msg(ChatRole::user, "Hi")}, false, {.enable_thinking = false}),
              "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatFormat, MediaPartsBecomePlaceholdersInOrder) {
    ChatMessage user;
    user.role = ChatRole::user;
    user.content = {{.kind = ContentKind::image},
                    {.kind = ContentKind::text, .text = "and"},
                    {.kind = ContentKind::audio},
                    {.kind = ContentKind::video},
                    {.kind = ContentKind::text, .text = "?"}};
    EXPECT_EQ(render({user}, true),
              "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>and"
              "<|audio_start|><|audio_pad|><|audio_end|>"
              "<|vision_start|><|video_pad|><|vision_end|>?<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(placeholder(ContentKind::text), "");
}

TEST(ChatFormat, HistoryAssistantTurnsDropTheirReasoning) {
    const std::vector<ChatMessage> messages = {
        msg(ChatRole::user, "Q1"), msg(ChatRole::assistant, "<think>\nold\n</think>\n\nA1"),
        msg(ChatRole::user, "Q2")};
    EXPECT_EQ(render(messages, true),
              "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
              "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormat, TheLastAssistantTurnShowsItsReasoning) {
    EXPECT_EQ(render({msg(ChatRole::user, "Q"), msg(ChatRole::assistant, "A")}, false),
              "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
              "A<|im_end|>\n");
    ChatMessage answer = msg(ChatRole::assistant, "\nA");
    answer.reasoning_content = "\n\nR\n";
    EXPECT_EQ(render({msg(ChatRole::user, "Q"), answer}, false),
              "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nR\n</think>\n\n"
              "A<|im_end|>\n");
}

TEST(ChatFormat, ToolCallsAndToolResponses) {
    ChatMessage call = msg(ChatRole::assistant, "");
    call.tool_calls = {{"lookup", R"({"q": 1})"}, {"other", "{}"}};
    const std::vector<ChatMessage> messages = {
        msg(ChatRole::user, "Go"), call, msg(ChatRole::tool, "r1"), msg(ChatRole::tool, "r2")};
    EXPECT_EQ(render(messages, true),
              "<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n"
              "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"q\": 1}}\n</tool_call>\n"
              "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
              "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
              "</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormat, LaterSystemMessagesAreOrdinaryTurns) {
    EXPECT_EQ(render({msg(ChatRole::user, "a"), msg(ChatRole::system, "b")}, false),
              "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n");
}

TEST(ChatFormat, Errors) {
    auto empty = format_chat({}, true);
    ASSERT_FALSE(empty.has_value());
    EXPECT_EQ(empty.error().code, ErrorCode::invalid_argument);

    ChatMessage user = msg(ChatRole::user, "x");
    user.reasoning_content = "no";
    auto reasoning = format_chat(std::vector<ChatMessage>{msg(ChatRole::system, "s"), user}, true);
    ASSERT_FALSE(reasoning.has_value());
    EXPECT_NE(reasoning.error().message.find("messages[1]"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::models::qwen3

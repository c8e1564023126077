// The model-independent chat message types (text/chat_message.h).
#include "text/chat_message.h"

#include <gtest/gtest.h>

namespace omnirt::text {
namespace {

TEST(ChatMessage, RolesRoundTripAndUnknownOnesAreNamed) {
    for (ChatRole role : {ChatRole::system, ChatRole::user, ChatRole::assistant, ChatRole::tool}) {
        EXPECT_EQ(parse_chat_role(to_string(role)), role);
    }
    auto unknown = parse_chat_role("developer");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_NE(unknown.error().message.find("developer"), std::string::npos);
}

TEST(ChatMessage, TextIsOneTextPart) {
    const ChatMessage message = ChatMessage::text(ChatRole::assistant, "hi");
    EXPECT_EQ(message.role, ChatRole::assistant);
    ASSERT_EQ(message.content.size(), 1u);
    EXPECT_EQ(message.content[0].kind, ContentKind::text);
    EXPECT_EQ(message.content[0].text, "hi");
}

}  // namespace
}  // namespace omnirt::text

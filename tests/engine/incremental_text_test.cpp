#include "engine/incremental_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace omnirt::engine {
namespace {

// Feeds `pieces` and returns the released deltas (the last entry is finish()).
std::vector<std::string> feed(IncrementalText& text, const std::vector<std::string>& pieces) {
    std::vector<std::string> out;
    for (const std::string& piece : pieces) {
        if (text.stopped()) break;
        out.push_back(text.append(piece));
    }
    out.push_back(text.finish());
    return out;
}

std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& part : parts) out += part;
    return out;
}

TEST(IncrementalTextTest, PassesTextThroughWithoutStops) {
    IncrementalText text;
    const auto out = feed(text, {"Hel", "lo", " world"});
    EXPECT_EQ(out, (std::vector<std::string>{"Hel", "lo", " world", ""}));
    EXPECT_EQ(text.text(), "Hello world");
    EXPECT_FALSE(text.stopped());
}

TEST(IncrementalTextTest, StopStringAcrossTokensIsNeverShown) {
    IncrementalText text({"STOP"});
    const auto out = feed(text, {"ab S", "T", "O", "P tail"});
    EXPECT_TRUE(text.stopped());
    EXPECT_EQ(out, (std::vector<std::string>{"ab ", "", "", "", ""}));
    EXPECT_EQ(text.text(), "ab ");
}

TEST(IncrementalTextTest, FalseStartIsReleasedOnceDecided) {
    IncrementalText text({"STOP"});
    const auto out = feed(text, {"x ST", "AR", "T"});
    EXPECT_FALSE(text.stopped());
    EXPECT_EQ(out, (std::vector<std::string>{"x ", "STAR", "T", ""}));
    // Held back at the end of the stream: released by finish().
    IncrementalText tail({"STOP"});
    EXPECT_EQ(feed(tail, {"go S", "TO"}), (std::vector<std::string>{"go ", "", "STO"}));
}

TEST(IncrementalTextTest, EarliestOfSeveralStops) {
    IncrementalText text({"world", "lo w"});
    const auto out = feed(text, {"hello world"});
    EXPECT_TRUE(text.stopped());
    EXPECT_EQ(text.text(), "hel");
    EXPECT_EQ(join(out), "hel");
}

TEST(IncrementalTextTest, StopInsideOneToken) {
    IncrementalText text({"\n\n"});
    const auto out = feed(text, {"one", "\n\ntwo"});
    EXPECT_EQ(out, (std::vector<std::string>{"one", "", ""}));
    EXPECT_TRUE(text.stopped());
}

TEST(IncrementalTextTest, HoldsIncompleteUtf8) {
    // "é" = C3 A9, "😀" = F0 9F 98 80, split over tokens.
    IncrementalText text;
    const auto out = feed(text, {"caf\xC3", "\xA9 \xF0\x9F", "\x98", "\x80!"});
    EXPECT_EQ(out, (std::vector<std::string>{"caf", "\xC3\xA9 ", "", "\xF0\x9F\x98\x80!", ""}));
    EXPECT_EQ(text.text(), "caf\xC3\xA9 \xF0\x9F\x98\x80!");
}

TEST(IncrementalTextTest, InvalidBytesBecomeReplacementCharacters) {
    IncrementalText text;
    const auto out = feed(text, {"a\xFF", "b\xC3"});  // stray byte; truncated character at the end
    EXPECT_EQ(join(out),
              "a\xEF\xBF\xBD"
              "b\xEF\xBF\xBD");
    EXPECT_EQ(text.text(), join(out));
    EXPECT_EQ(sanitize_utf8("\xE0\x80x"), "\xEF\xBF\xBD\xEF\xBF\xBDx");  // overlong: 2 subparts
    EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
    EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98"), 3u);
    EXPECT_EQ(incomplete_utf8_tail("ab\xC3"), 1u);
    EXPECT_EQ(incomplete_utf8_tail("ab\xC3\xA9"), 0u);
    EXPECT_EQ(incomplete_utf8_tail("ab\xFF"), 0u);
}

TEST(IncrementalTextTest, StopStringWithMultibyteCharacters) {
    IncrementalText text({"é!"});
    const auto out = feed(text, {"x\xC3", "\xA9", "!y"});
    EXPECT_TRUE(text.stopped());
    EXPECT_EQ(text.text(), "x");
    EXPECT_EQ(join(out), "x");
}

}  // namespace
}  // namespace omnirt::engine

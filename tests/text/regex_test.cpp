// The PCRE2 wrapper of the Split pre-tokenizer: the \s rewrite and Qwen's pattern.
#include <gtest/gtest.h>

#include "text/regex.h"
#include "tiny_tokenizer.h"

namespace omnirt::text::detail {
namespace {

std::vector<std::string> matches(const Regex& regex, std::string_view subject) {
    std::vector<Span> spans;
    const Status status = regex.find_all(subject, spans);
    EXPECT_TRUE(status.has_value()) << status.error().to_string();
    std::vector<std::string> out;
    for (const Span& span : spans)
        out.emplace_back(subject.substr(span.begin, span.end - span.begin));
    return out;
}

TEST(Regex, RewritesWhitespaceEscapesOutsideQuotesOnly) {
    EXPECT_EQ(rewrite_whitespace_escapes(R"(\s+(?!\S))"), R"(\p{White_Space}+(?!\P{White_Space}))");
    EXPECT_EQ(rewrite_whitespace_escapes(R"([^\s\p{L}])"), R"([^\p{White_Space}\p{L}])");
    EXPECT_EQ(rewrite_whitespace_escapes(R"(\\s)"), R"(\\s)");  // an escaped backslash, then s
    EXPECT_EQ(rewrite_whitespace_escapes(R"(\Q\s\E\s)"), R"(\Q\s\E\p{White_Space})");
    EXPECT_EQ(rewrite_whitespace_escapes("a\\"), "a\\");
}

TEST(Regex, QwenPatternSplitsLikeTheReference) {
    auto regex = Regex::compile(testing::kQwenPattern, false);
    ASSERT_TRUE(regex.has_value()) << regex.error().to_string();
    EXPECT_EQ(matches(**regex, "Hello world's 123!!\n\n  x"),
              (std::vector<std::string>{"Hello", " world", "'s", " ", "1", "2", "3", "!!\n\n", " ",
                                        " x"}));
    // (?i:'s) follows Unicode case folding (as Oniguruma does): 'ſ (U+017F) is a contraction.
    EXPECT_EQ(matches(**regex, "'\u017ft"), (std::vector<std::string>{"'\u017f", "t"}));
    EXPECT_EQ(matches(**regex, "'St"), (std::vector<std::string>{"'S", "t"}));
}

TEST(Regex, LiteralPatternsAreNotRegexes) {
    auto regex = Regex::compile("a.b", true);
    ASSERT_TRUE(regex.has_value());
    EXPECT_EQ(matches(**regex, "a.b axb a.b"), (std::vector<std::string>{"a.b", "a.b"}));
}

TEST(Regex, EmptyMatchesAreSkipped) {
    auto regex = Regex::compile("x*", false);
    ASSERT_TRUE(regex.has_value());
    EXPECT_EQ(matches(**regex, "abxxc\u00e9x"), (std::vector<std::string>{"xx", "x"}));
}

TEST(Regex, BadPatternsNameTheOffset) {
    auto regex = Regex::compile("(unclosed", false);
    ASSERT_FALSE(regex.has_value());
    EXPECT_EQ(regex.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(regex.error().message.find("offset"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::text::detail

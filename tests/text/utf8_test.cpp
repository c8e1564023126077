// UTF-8 validation, lossy decoding by maximal subparts, and what encode does with bad input.
#include <gtest/gtest.h>

#include "text/utf8.h"
#include "tiny_tokenizer.h"

namespace omnirt::text {
namespace {

std::string lossy(std::string_view bytes) {
    std::string out;
    append_utf8_lossy(bytes, out);
    return out;
}

TEST(Utf8, ValidTextHasNoInvalidByte) {
    for (std::string_view text : std::initializer_list<std::string_view>{
             "", "ascii", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80",
             "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "日本語 😀 👨‍👩‍👧",
             std::string_view("\0", 1)}) {
        EXPECT_EQ(find_invalid_utf8(text), std::nullopt) << text;
    }
}

TEST(Utf8, FindsTheFirstInvalidByte) {
    const std::vector<std::pair<std::string_view, std::size_t>> cases = {
        {"\x80", 0},              // stray continuation byte
        {"ab\xC0\x80", 2},        // overlong NUL
        {"\xC1\xBF", 0},          // overlong
        {"x\xE0\x80\x80", 1},     // overlong three-byte form
        {"\xED\xA0\x80", 0},      // UTF-16 surrogate
        {"\xF0\x80\x80\x80", 0},  // overlong four-byte form
        {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
        {"\xF5\x80\x80\x80", 0},  // invalid lead byte
        {"\xFF", 0},
        {"ok\xE6\x97", 2},  // truncated at the end
        {"\xE6\x97\xA5\xE6", 3},
    };
    for (const auto& [bytes, offset] : cases) {
        EXPECT_EQ(find_invalid_utf8(bytes), offset) << testing::spell(bytes);
    }
}

TEST(Utf8, LossyDecodingReplacesMaximalSubparts) {
    // The example of Unicode 15 §3.9 (Table 3-8), also WHATWG's and Python's behaviour.
    EXPECT_EQ(lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
              "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd");
    EXPECT_EQ(lossy("\xC0\xAF"), "\uFFFD\uFFFD");
    EXPECT_EQ(lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
    EXPECT_EQ(lossy("\xF0\x9F\x98"), "\uFFFD");  // one truncated sequence: one replacement
    EXPECT_EQ(lossy("valid 😀"), "valid 😀");
}

TEST(Utf8, CompletePrefixHoldsBackAnUnfinishedCharacter) {
    const std::string smile = "\xF0\x9F\x98\x80";
    for (std::size_t cut = 1; cut < smile.size(); ++cut) {
        std::string out;
        const std::string bytes = "ab" + smile.substr(0, cut);
        EXPECT_EQ(append_utf8_complete_prefix(bytes, out), 2u);
        EXPECT_EQ(out, "ab");
    }
    std::string out;
    EXPECT_EQ(append_utf8_complete_prefix("a\xF0\x9F\x41", out), 4u);  // broken, not unfinished
    EXPECT_EQ(out, "a\uFFFDA");
}

TEST(Utf8, AppendCodePoint) {
    std::string out;
    for (char32_t c : {U'A', U'\u00e9', U'\u20ac', U'\U0001F600', U'\U0010FFFF'}) {
        append_code_point(c, out);
    }
    EXPECT_EQ(out, "A\u00e9\u20ac\U0001F600\U0010FFFF");
}

TEST(Utf8, EncodeRejectsInvalidUtf8NamingTheOffset) {
    auto tokenizer = testing::make_tokenizer(testing::tiny_tokenizer_json());
    for (const auto& [bytes, offset] : std::vector<std::pair<std::string_view, std::size_t>>{
             {"hello \xFF world", 6}, {"\xC0\x80", 0}, {"ok\xE6\x97", 2}, {"\xED\xA0\x80", 0}}) {
        auto ids = tokenizer->encode(bytes);
        ASSERT_FALSE(ids.has_value());
        EXPECT_EQ(ids.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(ids.error().message.find("not valid UTF-8"), std::string::npos);
        EXPECT_NE(ids.error().message.find("offset " + std::to_string(offset)), std::string::npos)
            << ids.error().message;
    }
    // NUL and other control characters are valid UTF-8 and encode.
    auto ids = tokenizer->encode(std::string_view("a\0b", 3));
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(ids->size(), 3u);
}

TEST(Utf8, DecodeOfIdsThatSplitACharacterReplacesIt) {
    auto tokenizer = testing::make_tokenizer(testing::tiny_tokenizer_json());
    // Byte tokens 0xF0 0x9F 0x98 (an unfinished emoji) then 'a'.
    const std::vector<TokenId> ids{0xF0, 0x9F, 0x98, 'a'};
    auto text = tokenizer->decode(ids);
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(*text, "\uFFFDa");
}

}  // namespace
}  // namespace omnirt::text

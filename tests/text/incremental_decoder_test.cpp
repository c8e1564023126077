// IncrementalDecoder: complete UTF-8 only, characters split across tokens, equality with decode.
#include <gtest/gtest.h>

#include <random>

#include "text/incremental_decoder.h"
#include "text/utf8.h"
#include "tiny_tokenizer.h"

namespace omnirt::text {
namespace {

std::shared_ptr<const Tokenizer> tiny() {
    static const std::shared_ptr<const Tokenizer> tokenizer =
        testing::make_tokenizer(testing::tiny_tokenizer_json());
    return tokenizer;
}

std::string push(IncrementalDecoder& decoder, TokenId id) {
    auto text = decoder.push(id);
    EXPECT_TRUE(text.has_value()) << text.error().to_string();
    return text.value_or("<error>");
}

TEST(IncrementalDecoder, HoldsBytesUntilTheCharacterCompletes) {
    IncrementalDecoder decoder(tiny());
    // 😀 = F0 9F 98 80, one byte token each.
    EXPECT_EQ(push(decoder, 0xF0), "");
    EXPECT_EQ(decoder.pending_bytes(), 1u);
    EXPECT_EQ(push(decoder, 0x9F), "");
    EXPECT_EQ(push(decoder, 0x98), "");
    EXPECT_EQ(decoder.pending_bytes(), 3u);
    EXPECT_EQ(push(decoder, 0x80), "\U0001F600");
    EXPECT_EQ(decoder.pending_bytes(), 0u);
    EXPECT_EQ(decoder.flush(), "");
}

TEST(IncrementalDecoder, EmitsWholeTokensAtOnce) {
    IncrementalDecoder decoder(tiny());
    EXPECT_EQ(push(decoder, testing::tiny_id("hello")), "hello");
    EXPECT_EQ(push(decoder, testing::tiny_id(" world")), " world");
    EXPECT_EQ(push(decoder, 1000), "<|end|>");
}

TEST(IncrementalDecoder, CharacterSplitInsideAMultiByteToken) {
    IncrementalDecoder decoder(tiny());
    // "é" (C3 A9) then "日" (E6 97 A5) with the boundary inside: 'a' C3 | A9 E6 | 97 A5.
    EXPECT_EQ(push(decoder, 'a'), "a");
    EXPECT_EQ(push(decoder, 0xC3), "");
    EXPECT_EQ(push(decoder, 0xA9), "\u00e9");
    EXPECT_EQ(push(decoder, 0xE6), "");
    EXPECT_EQ(push(decoder, 0x97), "");
    EXPECT_EQ(push(decoder, 0xA5), "\u65e5");
}

TEST(IncrementalDecoder, BrokenSequencesBecomeReplacementAsSoonAsTheyAreKnownBroken) {
    IncrementalDecoder decoder(tiny());
    EXPECT_EQ(push(decoder, 0xE6), "");
    EXPECT_EQ(push(decoder, 'x'), "\uFFFDx");  // E6 cannot be followed by 'x'
    EXPECT_EQ(push(decoder, 0x80), "\uFFFD");  // a stray continuation byte
    EXPECT_EQ(push(decoder, 0xF0), "");
    EXPECT_EQ(decoder.flush(), "\uFFFD");  // unfinished at the end
    EXPECT_EQ(decoder.pending_bytes(), 0u);
    EXPECT_EQ(push(decoder, 'y'), "y");  // flush reset the decoder
}

TEST(IncrementalDecoder, UnknownIdFailsAndKeepsState) {
    IncrementalDecoder decoder(tiny());
    EXPECT_EQ(push(decoder, 0xC3), "");
    auto bad = decoder.push(500);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.error().code, ErrorCode::out_of_range);
    EXPECT_EQ(decoder.pending_bytes(), 1u);
    EXPECT_EQ(push(decoder, 0xA9), "\u00e9");
}

TEST(IncrementalDecoder, SkipsSpecialTokensWhenAsked) {
    IncrementalDecoder decoder(tiny(), {.skip_special_tokens = true});
    EXPECT_EQ(push(decoder, 'a'), "a");
    EXPECT_EQ(push(decoder, 1000), "");
    EXPECT_EQ(push(decoder, 1001), "<x>");  // added but not special
}

// Random id sequences (mostly bytes of multi-byte characters, some broken): the streamed text
// equals the full decode and every piece is valid UTF-8.
TEST(IncrementalDecoder, RandomSequencesMatchFullDecode) {
    std::mt19937 random(12345);
    const std::string source = "aé日😀👨‍👩‍👧 hello world\xF0\x9F\x98\xE6\x80\xBF";
    for (int round = 0; round < 2000; ++round) {
        std::vector<TokenId> ids;
        const int length = static_cast<int>(random() % 24);
        for (int i = 0; i < length; ++i) {
            const unsigned pick = random() % 10;
            if (pick == 0) {
                ids.push_back(1000 + static_cast<TokenId>(random() % 2));
            } else if (pick == 1) {
                ids.push_back(testing::tiny_id(" world"));
            } else {
                ids.push_back(static_cast<unsigned char>(source[random() % source.size()]));
            }
        }
        for (bool skip : {false, true}) {
            IncrementalDecoder decoder(tiny(), {.skip_special_tokens = skip});
            std::string streamed;
            for (TokenId id : ids) {
                const std::string piece = push(decoder, id);
                ASSERT_EQ(find_invalid_utf8(piece), std::nullopt);
                streamed += piece;
            }
            streamed += decoder.flush();
            auto full = tiny()->decode(ids, {.skip_special_tokens = skip});
            ASSERT_TRUE(full.has_value());
            ASSERT_EQ(streamed, *full) << "round " << round;
        }
    }
}

}  // namespace
}  // namespace omnirt::text

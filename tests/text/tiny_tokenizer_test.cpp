// The tokenizer on a hand-written tokenizer.json (tests/text/tiny_tokenizer.h): merges, added
// tokens and their flags, normalizers, pre-tokenizer variants, post-processor, lookups.
#include <gtest/gtest.h>

#include <thread>

#include "text/tokenizer.h"
#include "tiny_tokenizer.h"

namespace omnirt::text {
namespace {

using nlohmann::json;
using testing::make_tokenizer;
using testing::spell;
using testing::tiny_id;
using testing::tiny_tokenizer_json;

std::vector<TokenId> encode(const Tokenizer& tokenizer, std::string_view text,
                            const EncodeOptions& options = {}) {
    auto ids = tokenizer.encode(text, options);
    EXPECT_TRUE(ids.has_value()) << ids.error().to_string();
    return ids.value_or(std::vector<TokenId>{});
}

std::vector<TokenId> ids_of(std::initializer_list<std::string_view> pieces) {
    std::vector<TokenId> ids;
    for (std::string_view piece : pieces) ids.push_back(tiny_id(piece));
    return ids;
}

std::string decode(const Tokenizer& tokenizer, std::span<const TokenId> ids,
                   const DecodeOptions& options = {}) {
    auto text = tokenizer.decode(ids, options);
    EXPECT_TRUE(text.has_value()) << text.error().to_string();
    return text.value_or("");
}

json& pre_tokenizers(json& root) { return root["pre_tokenizer"]["pretokenizers"]; }

TEST(TinyTokenizer, EncodesWordsWithRankedMerges) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    EXPECT_EQ(encode(*tokenizer, "hello world"), ids_of({"hello", " world"}));
    EXPECT_EQ(encode(*tokenizer, "hello"), ids_of({"hello"}));
    EXPECT_EQ(encode(*tokenizer, "help"), ids_of({"he", "l", "p"}));
    EXPECT_EQ(encode(*tokenizer, ""), std::vector<TokenId>{});
}

TEST(TinyTokenizer, LowerRankMergesFirst) {
    // "b c" (rank 10) comes before "a b" (rank 11): abc -> a + bc, not ab + c.
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    EXPECT_EQ(encode(*tokenizer, "abc"), ids_of({"a", "bc"}));
    EXPECT_EQ(encode(*tokenizer, "abd"), ids_of({"ab", "d"}));
}

TEST(TinyTokenizer, RepeatedPairsMergeLeftToRight) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    EXPECT_EQ(encode(*tokenizer, "aaa"), ids_of({"aa", "a"}));
    EXPECT_EQ(encode(*tokenizer, "aaaa"), ids_of({"aa", "aa"}));
    EXPECT_EQ(encode(*tokenizer, "aaaaa"), ids_of({"aa", "aa", "a"}));
}

TEST(TinyTokenizer, BothMergeEncodingsAreEquivalent) {
    auto strings = make_tokenizer(tiny_tokenizer_json({.merges_as_pairs = false}));
    auto pairs = make_tokenizer(tiny_tokenizer_json({.merges_as_pairs = true}));
    for (std::string_view text : {"hello world", "abc aaaa", "hello\n\nworld  ", "ld or wor"}) {
        EXPECT_EQ(encode(*strings, text), encode(*pairs, text)) << text;
    }
}

TEST(TinyTokenizer, DecodeInvertsEncodeForAnyUtf8) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    for (std::string_view text : {"hello world", "  spaced\t\ttabs\n\n",
                                  "日本語 😀 👨‍👩‍👧", "\x01\x7f control", "a"}) {
        EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, text)), text);
    }
}

TEST(TinyTokenizer, AddedTokensSplitTheTextFirst) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    std::vector<TokenId> expected = ids_of({"hello"});
    expected.push_back(1000);
    expected.push_back(1001);
    for (TokenId id : ids_of({" world"})) expected.push_back(id);
    EXPECT_EQ(encode(*tokenizer, "hello<|end|><x> world"), expected);
    EXPECT_EQ(encode(*tokenizer, "<|end|>"), std::vector<TokenId>{1000});
    // A prefix of an added token is text.
    EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, "<|en")), "<|en");
}

TEST(TinyTokenizer, SpecialTokensCanBeEncodedAsText) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    const auto ids = encode(*tokenizer, "<|end|><x>", {.match_special_tokens = false});
    // The special token becomes byte tokens; the non-special added token still matches.
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), 1001);
    for (TokenId id : ids) EXPECT_NE(id, 1000);
    EXPECT_EQ(decode(*tokenizer, ids), "<|end|><x>");
}

TEST(TinyTokenizer, DecodeCanSkipSpecialTokens) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    const auto ids = encode(*tokenizer, "hello<|end|><x>");
    EXPECT_EQ(decode(*tokenizer, ids), "hello<|end|><x>");
    EXPECT_EQ(decode(*tokenizer, ids, {.skip_special_tokens = true}), "hello<x>");
    EXPECT_TRUE(tokenizer->is_special(1000));
    EXPECT_FALSE(tokenizer->is_special(1001));
    EXPECT_FALSE(tokenizer->is_special(tiny_id("hello")));
}

TEST(TinyTokenizer, LstripAndRstripTakeTheWhitespaceAround) {
    json root = tiny_tokenizer_json();
    root["added_tokens"].push_back({{"id", 1002},
                                    {"content", "<mask>"},
                                    {"special", true},
                                    {"lstrip", true},
                                    {"rstrip", true}});
    auto tokenizer = make_tokenizer(root);
    std::vector<TokenId> expected = ids_of({"a"});
    expected.push_back(1002);
    expected.push_back(tiny_id("b"));
    EXPECT_EQ(encode(*tokenizer, "a \u3000 <mask> \t b"), expected);
    EXPECT_EQ(encode(*tokenizer, "a<mask>b"), expected);
}

TEST(TinyTokenizer, SingleWordTokensMatchOnlyAlone) {
    json root = tiny_tokenizer_json();
    root["added_tokens"].push_back(
        {{"id", 1002}, {"content", "ok"}, {"special", false}, {"single_word", true}});
    auto tokenizer = make_tokenizer(root);
    const auto alone = encode(*tokenizer, "an ok day");
    EXPECT_NE(std::find(alone.begin(), alone.end(), 1002), alone.end());
    const auto inside = encode(*tokenizer, "books");
    EXPECT_EQ(std::find(inside.begin(), inside.end(), 1002), inside.end());
    const auto before_letter = encode(*tokenizer, "éok");
    EXPECT_EQ(std::find(before_letter.begin(), before_letter.end(), 1002), before_letter.end());
}

TEST(TinyTokenizer, NfcNormalizerComposes) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json({.nfc = true}));
    EXPECT_EQ(encode(*tokenizer, "e\u0301"), encode(*tokenizer, "\u00e9"));
    EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, "cafe\u0301")), "caf\u00e9");
    EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, "\u212b")), "\u00c5");  // Angstrom sign
    auto plain = make_tokenizer(tiny_tokenizer_json({.nfc = false}));
    EXPECT_NE(encode(*plain, "e\u0301"), encode(*plain, "\u00e9"));
}

TEST(TinyTokenizer, NfkcAndSequenceNormalizers) {
    json root = tiny_tokenizer_json();
    root["normalizer"] = {{"type", "Sequence"},
                          {"normalizers", json::array({{{"type", "NFD"}}, {{"type", "NFKC"}}})}};
    auto tokenizer = make_tokenizer(root);
    EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, "\ufb01 \uff21")), "fi A");
}

TEST(TinyTokenizer, NormalizedAddedTokensMatchAfterNormalization) {
    json root = tiny_tokenizer_json({.nfc = true});
    root["added_tokens"].push_back(
        {{"id", 1002}, {"content", "\u00e9"}, {"special", false}, {"normalized", true}});
    root["added_tokens"].push_back(
        {{"id", 1003}, {"content", "\u00c5"}, {"special", false}, {"normalized", false}});
    auto tokenizer = make_tokenizer(root);
    EXPECT_EQ(encode(*tokenizer, "e\u0301"), std::vector<TokenId>{1002});
    // Not normalized: matched against the raw input only, so the decomposed form misses it.
    EXPECT_EQ(encode(*tokenizer, "\u00c5"), std::vector<TokenId>{1003});
    const auto decomposed = encode(*tokenizer, "A\u030a");
    EXPECT_EQ(std::find(decomposed.begin(), decomposed.end(), 1003), decomposed.end());
}

TEST(TinyTokenizer, TemplatePostProcessorAddsSpecialTokens) {
    json root = tiny_tokenizer_json();
    root["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                {{"SpecialToken", {{"id", "<x>"}, {"type_id", 0}}}}})},
        {"special_tokens",
         {{"<|end|>", {{"id", "<|end|>"}, {"ids", {1000}}, {"tokens", {"<|end|>"}}}},
          {"<x>", {{"id", "<x>"}, {"ids", {1001}}, {"tokens", {"<x>"}}}}}}};
    auto tokenizer = make_tokenizer(root);
    EXPECT_EQ(encode(*tokenizer, "a", {.add_special_tokens = true}),
              (std::vector<TokenId>{1000, 'a', 1001}));
    EXPECT_EQ(encode(*tokenizer, "a", {.add_special_tokens = false}), (std::vector<TokenId>{'a'}));
    auto plain = tokenizer->encode("a", false);
    ASSERT_TRUE(plain.has_value());
    EXPECT_EQ(*plain, (std::vector<TokenId>{'a'}));
}

TEST(TinyTokenizer, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
    json root = tiny_tokenizer_json();
    root["model"]["vocab"][spell("xyz")] = 2000;  // no merge produces it
    root["model"]["ignore_merges"] = true;
    auto tokenizer = make_tokenizer(root);
    EXPECT_EQ(encode(*tokenizer, "xyz"), std::vector<TokenId>{2000});
    root["model"]["ignore_merges"] = false;
    auto merging = make_tokenizer(root);
    EXPECT_EQ(encode(*merging, "xyz"), (std::vector<TokenId>{'x', 'y', 'z'}));
}

TEST(TinyTokenizer, SplitBehaviors) {
    auto with_split = [](const char* behavior, const char* pattern) {
        json root = tiny_tokenizer_json();
        pre_tokenizers(root)[0] = {{"type", "Split"},
                                   {"pattern", {{"String", pattern}}},
                                   {"behavior", behavior},
                                   {"invert", false}};
        return make_tokenizer(root);
    };
    // Removed drops the delimiter; the others keep it, attached differently: "he" + "ll" only
    // merge into "hell" when they end up in one word.
    EXPECT_EQ(encode(*with_split("Removed", "-"), "he-ll"), ids_of({"he", "ll"}));
    EXPECT_EQ(encode(*with_split("Isolated", "-"), "he-ll"), ids_of({"he", "-", "ll"}));
    EXPECT_EQ(encode(*with_split("MergedWithPrevious", "l"), "hello"),
              ids_of({"he", "l", "l", "o"}));
    EXPECT_EQ(encode(*with_split("MergedWithNext", "h"), "ahello"), ids_of({"a", "hello"}));
    EXPECT_EQ(encode(*with_split("Contiguous", "l"), "hello"), ids_of({"he", "ll", "o"}));
}

TEST(TinyTokenizer, ByteLevelRegexAndPrefixSpace) {
    json root = tiny_tokenizer_json();
    root["pre_tokenizer"] = {
        {"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
    auto tokenizer = make_tokenizer(root);
    EXPECT_EQ(encode(*tokenizer, "world"), ids_of({" world"}));
    EXPECT_EQ(encode(*tokenizer, " world"), ids_of({" world"}));
    EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, "hello world")), " hello world");
}

TEST(TinyTokenizer, BackslashSIsUnicodeWhiteSpace) {
    json root = tiny_tokenizer_json();
    pre_tokenizers(root)[0] = {{"type", "Split"},
                               {"pattern", {{"Regex", "\\s+"}}},
                               {"behavior", "Removed"},
                               {"invert", false}};
    auto tokenizer = make_tokenizer(root);
    // U+0085 (NEL) is White_Space (as in Oniguruma and Rust's regex); U+180E is not, although
    // PCRE2's own \s matches it.
    EXPECT_EQ(encode(*tokenizer, "a\u0085b"), (std::vector<TokenId>{'a', 'b'}));
    EXPECT_EQ(encode(*tokenizer, "a\u3000\u2028b"), (std::vector<TokenId>{'a', 'b'}));
    EXPECT_EQ(encode(*tokenizer, "a\u180eb").size(), 5u);  // a, 3 bytes, b
    EXPECT_EQ(encode(*tokenizer, "a\ufeffb").size(), 5u);
}

TEST(TinyTokenizer, LookupsAndVocabularySize) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    EXPECT_EQ(tokenizer->vocab_size(), 1002u);
    EXPECT_EQ(tokenizer->token_to_id(spell("hello")), tiny_id("hello"));
    EXPECT_EQ(tokenizer->token_to_id("<|end|>"), 1000);
    EXPECT_EQ(tokenizer->token_to_id("nope"), std::nullopt);
    EXPECT_EQ(tokenizer->id_to_token(tiny_id(" world")), spell(" world"));
    EXPECT_EQ(tokenizer->id_to_token(1001), "<x>");
    EXPECT_EQ(tokenizer->id_to_token(500), std::nullopt);  // a gap
    EXPECT_EQ(tokenizer->id_to_token(-1), std::nullopt);
    EXPECT_EQ(tokenizer->id_to_token(1002), std::nullopt);
}

TEST(TinyTokenizer, DecodeRejectsIdsThatNameNoToken) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    for (TokenId id : {-1, 500, 1002, 1 << 30}) {
        const std::vector<TokenId> ids{'a', id};
        auto text = tokenizer->decode(ids);
        ASSERT_FALSE(text.has_value()) << id;
        EXPECT_EQ(text.error().code, ErrorCode::out_of_range);
        EXPECT_NE(text.error().message.find(std::to_string(id)), std::string::npos);
        std::string out;
        EXPECT_FALSE(tokenizer->append_token_bytes(id, out).has_value());
        EXPECT_TRUE(out.empty());
    }
}

TEST(TinyTokenizer, LongRunsDoNotExhaustTheRegexStack) {
    auto tokenizer = make_tokenizer(tiny_tokenizer_json());
    for (const std::string& text :
         {std::string(1 << 20, ' '), std::string(1 << 20, 'a'), std::string(1 << 18, '\n'),
          std::string(1 << 18, '!') + " " + std::string(1 << 18, '\t') + "x"}) {
        const auto ids = encode(*tokenizer, text);
        EXPECT_EQ(decode(*tokenizer, ids), text);
    }
}

TEST(TinyTokenizer, ConcurrentEncodesAgree) {
    std::shared_ptr<const Tokenizer> tokenizer = make_tokenizer(tiny_tokenizer_json());
    std::string text;
    for (int i = 0; i < 2000; ++i) text += "hello world aaaa abc " + std::to_string(i % 97) + " ";
    const auto expected = encode(*tokenizer, text);
    std::vector<std::thread> threads;
    std::vector<bool> same(4, false);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            bool all = true;
            for (int round = 0; round < 5; ++round) {
                auto ids = tokenizer->encode(text);
                all = all && ids.has_value() && *ids == expected;
            }
            same[static_cast<std::size_t>(t)] = all;
        });
    }
    for (auto& thread : threads) thread.join();
    for (bool ok : same) EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace omnirt::text

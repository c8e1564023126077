// The tiny tokenizer of generated checkpoints: Qwen's pre-tokenizer split, byte-level vocabulary,
// learned merges, special-token ids and the tokenizer.json / tokenizer_config.json schema.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "models/qwen3/tiny_tokenizer.h"

namespace omnirt::models::qwen3 {
namespace {

using ::testing::ElementsAre;

// Expected pieces from the Qwen2 split regex run by a Unicode regex engine (Node), recorded.
TEST(QwenSplit, MatchesTheRegexOnAscii) {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"Hello world", {"Hello", " world"}},
        {"I'm fine", {"I", "'m", " fine"}},
        {"don't", {"don", "'t"}},
        {"a  b", {"a", " ", " b"}},
        {"x\n\ny", {"x", "\n\n", "y"}},
        {"12345", {"1", "2", "3", "4", "5"}},
        {"foo();\n", {"foo", "();\n"}},
        {"  end  ", {" ", " end", "  "}},
        {"(hello)", {"(hello", ")"}},
        {"x = 1", {"x", " =", " ", "1"}},
        {"\tfoo", {"\tfoo"}},
        {"a \n b", {"a", " \n", " b"}},
        {"WE'LL GO", {"WE", "'LL", " GO"}},
        {"it's 'quoted'", {"it", "'s", " '", "quoted", "'"}},
        {"a\r\n\r\nb", {"a", "\r\n\r\n", "b"}},
        {"  \n\n  x", {"  \n\n", " ", " x"}},
        {"tabs\t\there", {"tabs", "\t", "\there"}},
        {"end.\n", {"end", ".\n"}},
        {"x  ", {"x", "  "}},
        {" ", {" "}},
        {"\n", {"\n"}},
        {"a!!b", {"a", "!!", "b"}},
        {"a !! b", {"a", " !!", " b"}},
        {"'s", {"'s"}},
        {"''s", {"''", "s"}},
    };
    for (const auto& [text, pieces] : cases) {
        EXPECT_EQ(qwen_split_ascii(text), pieces) << text;
    }
    std::string joined;
    const auto corpus = qwen_split_ascii(tiny_tokenizer_corpus());
    for (const auto& piece : corpus) joined += piece;
    EXPECT_EQ(joined, tiny_tokenizer_corpus());
    EXPECT_EQ(corpus.size(), 1948u);  // as the regex splits it
}

TEST(TinyTokenizer, ByteLevelVocabularyInGpt2Order) {
    const auto& files = tiny_tokenizer_files();
    const auto& vocab = files.tokenizer["model"]["vocab"];
    EXPECT_EQ(vocab.size(), static_cast<std::size_t>(kTinyFirstSpecialId));
    EXPECT_EQ(files.vocab.size(), static_cast<std::size_t>(kTinyTokenizerSize));
    // The same ids as Qwen's own vocabulary for the byte tokens.
    EXPECT_EQ(vocab["!"], 0);
    EXPECT_EQ(vocab["\xc2\xa1"], 94);   // U+00A1
    EXPECT_EQ(vocab["\xc4\x80"], 188);  // byte 0 -> U+0100
    EXPECT_EQ(vocab["\xc4\x8a"], 198);  // '\n' -> U+010A
    EXPECT_EQ(vocab["\xc4\xa0"], 220);  // ' ' -> U+0120
    EXPECT_EQ(byte_level(" \n"), "\xc4\xa0\xc4\x8a");
    std::set<std::string> distinct;
    for (int b = 0; b < 256; ++b) {
        const char c = static_cast<char>(b);
        distinct.insert(byte_level(std::string_view(&c, 1)));
    }
    EXPECT_EQ(distinct.size(), 256u);
}

TEST(TinyTokenizer, MergesAreValidAndPinned) {
    const auto& files = tiny_tokenizer_files();
    const auto& vocab = files.tokenizer["model"]["vocab"];
    const auto& merges = files.tokenizer["model"]["merges"];
    ASSERT_GE(merges.size(), static_cast<std::size_t>(kTinyMerges));
    for (const auto& merge : merges) {
        const std::string text = merge.get<std::string>();
        const auto space = text.find(' ');
        ASSERT_NE(space, std::string::npos);
        const std::string left = text.substr(0, space);
        const std::string right = text.substr(space + 1);
        EXPECT_TRUE(vocab.contains(left)) << text;
        EXPECT_TRUE(vocab.contains(right)) << text;
        EXPECT_TRUE(vocab.contains(left + right)) << text;
    }
    // The first merges: a change of corpus or trainer shows here first.
    std::vector<std::string> first;
    for (std::size_t i = 0; i < 5; ++i) first.push_back(merges[i].get<std::string>());
    EXPECT_THAT(first, ElementsAre("\xc4\xa0 t", "h e", "\xc4\xa0 a", "e r", "\xc4\xa0 s"));
}

TEST(TinyTokenizer, RoleWordsAreSingleTokens) {
    for (const char* word : {"system", "user", "assistant"}) {
        EXPECT_EQ(tiny_bpe(word).size(), 1u) << word;
    }
    EXPECT_THAT(tiny_bpe(" the"), ElementsAre("\xc4\xa0the"));
}

TEST(TinyTokenizer, SpecialTokensKeepQwensOffsets) {
    const auto ids = tiny_tokenizer_ids();
    EXPECT_EQ(ids.endoftext, kTinyFirstSpecialId);
    EXPECT_EQ(ids.im_start, kTinyFirstSpecialId + 1);
    EXPECT_EQ(ids.im_end, kTinyFirstSpecialId + 2);
    EXPECT_EQ(ids.vision_start, kTinyFirstSpecialId + 9);
    EXPECT_EQ(ids.image_pad, kTinyFirstSpecialId + 12);
    EXPECT_EQ(ids.video_pad, kTinyFirstSpecialId + 13);
    EXPECT_EQ(ids.audio_start, kTinyFirstSpecialId + 26);
    EXPECT_EQ(ids.audio_pad, kTinyFirstSpecialId + 32);
    EXPECT_EQ(ids.audio_pad, kTinyTokenizerSize - 1);
    const auto& files = tiny_tokenizer_files();
    const auto& added = files.tokenizer["added_tokens"];
    ASSERT_EQ(added.size(), static_cast<std::size_t>(kQwenSpecialCount));
    for (std::size_t i = 0; i < added.size(); ++i) {
        const auto& token = qwen_special_tokens()[i];
        EXPECT_EQ(added[i]["id"], kTinyFirstSpecialId + (token.qwen_id - kQwenFirstSpecialId));
        EXPECT_EQ(added[i]["content"], token.content);
        EXPECT_EQ(added[i]["special"], token.special);
        EXPECT_EQ(added[i]["normalized"], false);
        EXPECT_EQ(files.vocab[added[i]["id"].get<std::size_t>()], token.content);
    }
    EXPECT_EQ(added[0]["content"], "<|endoftext|>");
    EXPECT_EQ(added[24]["content"], "<think>");
    EXPECT_EQ(added[24]["special"], false);
    EXPECT_EQ(added[32]["content"], "<|audio_pad|>");
}

TEST(TinyTokenizer, FollowsTheTokenizersJsonSchema) {
    const auto& files = tiny_tokenizer_files();
    const auto& t = files.tokenizer;
    EXPECT_EQ(t["version"], "1.0");
    EXPECT_EQ(t["normalizer"]["type"], "NFC");
    const auto& pre = t["pre_tokenizer"];
    EXPECT_EQ(pre["type"], "Sequence");
    ASSERT_EQ(pre["pretokenizers"].size(), 2u);
    const auto& split = pre["pretokenizers"][0];
    EXPECT_EQ(split["type"], "Split");
    EXPECT_EQ(split["pattern"]["Regex"],
              "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
    EXPECT_EQ(split["behavior"], "Isolated");
    EXPECT_EQ(split["invert"], false);
    const nlohmann::ordered_json byte_level_step = {{"type", "ByteLevel"},
                                                    {"add_prefix_space", false},
                                                    {"trim_offsets", false},
                                                    {"use_regex", false}};
    EXPECT_EQ(pre["pretokenizers"][1], byte_level_step);
    EXPECT_EQ(t["decoder"], byte_level_step);
    EXPECT_EQ(t["post_processor"], byte_level_step);
    EXPECT_EQ(t["model"]["type"], "BPE");
    EXPECT_EQ(t["model"]["byte_fallback"], false);
    EXPECT_TRUE(t["model"]["unk_token"].is_null());

    const auto& config = files.tokenizer_config;
    EXPECT_EQ(config["chat_template"], qwen3_chat_template());
    EXPECT_EQ(config["eos_token"], "<|im_end|>");
    EXPECT_EQ(config["pad_token"], "<|endoftext|>");
    EXPECT_TRUE(config["bos_token"].is_null());
    EXPECT_EQ(config["tokenizer_class"], "Qwen2Tokenizer");
    EXPECT_EQ(config["added_tokens_decoder"][std::to_string(kTinyFirstSpecialId + 2)]["content"],
              "<|im_end|>");
    EXPECT_NE(qwen3_chat_template().find("<|im_start|>assistant"), std::string_view::npos);
}

}  // namespace
}  // namespace omnirt::models::qwen3

// The generated tokenizer read by omnirt's own tokenizer (src/text): it must load like any Hugging
// Face tokenizer.json and encode as the reference implementation does. The expected ids were
// produced by @lenml/tokenizers (a port of Hugging Face's tokenizers) from the same files.
#include <gtest/gtest.h>

#include "checkpoint/test_support.h"
#include "models/qwen3/tiny_tokenizer.h"
#ifdef OMNIRT_HAVE_TEXT
#include "text/tokenizer.h"
#endif

namespace omnirt::models::qwen3 {
namespace {

TEST(TinyTokenizerText, EncodesAChatTurnLikeTheReference) {
#ifndef OMNIRT_HAVE_TEXT
    GTEST_SKIP() << "omnirt_text is not built";
#else
    checkpoint::testing::TempDir dir;
    checkpoint::testing::write_text(dir / "tokenizer.json",
                                    tiny_tokenizer_files().tokenizer.dump());
    auto tokenizer = text::Tokenizer::from_file((dir / "tokenizer.json").string());
    ASSERT_TRUE(tokenizer) << tokenizer.error().to_string();
    const std::string chat =
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello, how "
        "are you? I'm fine. 12345 <|audio_start|><|audio_pad|><|audio_end|><|im_end|>\n"
        "<|im_start|>assistant\n";
    auto ids = (*tokenizer)->encode(chat);
    ASSERT_TRUE(ids) << ids.error().to_string();
    const std::vector<text::TokenId> expected = {
        957, 524, 198, 462, 333, 258, 619, 614, 13,  958, 198, 957, 292, 198, 39,
        68,  380, 78,  11,  780, 369, 333, 652, 30,  478, 6,   76,  276, 510, 13,
        220, 16,  17,  18,  19,  20,  220, 982, 988, 983, 958, 198, 957, 298, 198};
    EXPECT_EQ(*ids, expected);
    auto decoded = (*tokenizer)->decode(*ids);
    ASSERT_TRUE(decoded);
    EXPECT_EQ(*decoded, chat);
#endif
}

}  // namespace
}  // namespace omnirt::models::qwen3

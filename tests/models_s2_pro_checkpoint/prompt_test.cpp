// The S2-Pro prompt of fact sheet section 3 with the generated tokenizer: every worked case token
// for token (each text part tokenized alone, special tokens as single ids, one semantic id per
// reference frame with its codes alongside), for both reference styles; malformed codes fail.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/s2_pro/make_checkpoint.h"
#include "models/s2_pro/prompt.h"

namespace omnirt::models::s2_pro {
namespace {

class S2ProPromptTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto made = text::Tokenizer::from_json(s2_pro_tokenizer_files().tokenizer.dump());
        ASSERT_TRUE(made.has_value()) << made.error().to_string();
        tokenizer_ = std::move(*made);
        auto config = parse_s2_pro_config(nlohmann::json(*s2_pro_preset("tiny", "bfloat16")));
        ASSERT_TRUE(config.has_value());
        config_ = *config;
    }

    // The ids of one text part, tokenized alone.
    std::vector<std::int32_t> part(const std::string& text) const {
        auto ids = tokenizer_->encode(text, false);
        OMNI_CHECK(ids.has_value(), "encode");
        return *ids;
    }
    static void append(std::vector<std::int32_t>& out, const std::vector<std::int32_t>& ids) {
        out.insert(out.end(), ids.begin(), ids.end());
    }

    // Codes [10, frames] with c_k(t) = (base + 7 t + 131 k) % (4096 or 1024).
    static CodeMatrix codes(std::int64_t frames, std::int32_t base) {
        CodeMatrix out{.codebooks = 10, .frames = frames, .codes = {}};
        for (std::int64_t k = 0; k < 10; ++k) {
            for (std::int64_t t = 0; t < frames; ++t) {
                const std::int64_t size = k == 0 ? 4096 : 1024;
                out.codes.push_back(static_cast<std::int32_t>((base + 7 * t + 131 * k) % size));
            }
        }
        return out;
    }

    std::unique_ptr<text::Tokenizer> tokenizer_;
    S2ProConfig config_;
};

TEST_F(S2ProPromptTest, SpecialTokensOfTheFramingAreSingleIds) {
    EXPECT_EQ(part("<|im_start|>user\n").front(), 151644);
    EXPECT_EQ(part("<|im_end|>\n").front(), 151645);
    EXPECT_EQ(part("<|im_end|>\n").size(), 2u);
    const auto open = part("<|im_start|>assistant\n<|voice|>");
    EXPECT_EQ(open.front(), 151644);
    EXPECT_EQ(open.back(), 151673);
}

TEST_F(S2ProPromptTest, SglangWithoutReferencesIsTheUserTurnAndTheOpenAssistantTurn) {
    auto prompt = build_prompt(*tokenizer_, config_, "Hello world.", {});
    ASSERT_TRUE(prompt.has_value()) << prompt.error().to_string();
    std::vector<std::int32_t> expected;
    append(expected, part("<|im_start|>user\n"));
    append(expected, part("<|speaker:0|>Hello world."));
    append(expected, part("<|im_end|>\n"));
    append(expected, part("<|im_start|>assistant\n<|voice|>"));
    EXPECT_EQ(prompt->ids, expected);
    EXPECT_TRUE(prompt->vq_positions.empty());
    EXPECT_TRUE(prompt->vq_codes.empty());
    EXPECT_EQ(prompt->ids.front(), 151644);
    EXPECT_EQ(prompt->ids.back(), 151673);
    // No system message: exactly two <|im_start|> (user, assistant).
    EXPECT_EQ(std::count(prompt->ids.begin(), prompt->ids.end(), 151644), 2);
}

TEST_F(S2ProPromptTest, SglangWithTwoReferencesConcatenatesTheirTextsAndCodes) {
    const std::vector<PromptReference> references = {
        {.text = "First clip.", .codes = codes(3, 100)},
        {.text = "Second clip.", .codes = codes(2, 4000)}};
    auto prompt = build_prompt(*tokenizer_, config_, "Say this.", references);
    ASSERT_TRUE(prompt.has_value()) << prompt.error().to_string();

    std::vector<std::int32_t> expected;
    append(expected, part("<|im_start|>system\n"));
    append(expected,
           part("convert the provided text to speech reference to the following:\n\nText:\n"));
    append(expected, part("<|speaker:0|>First clip."));  // no separator, always speaker 0
    append(expected, part("<|speaker:0|>Second clip."));
    append(expected, part("\n\nSpeech:\n"));
    const auto vq_begin = static_cast<std::int64_t>(expected.size());
    for (std::int32_t c0 : {100, 107, 114, 4000, 4007 % 4096}) expected.push_back(151678 + c0);
    append(expected, part("<|im_end|>\n"));
    append(expected, part("<|im_start|>user\n"));
    append(expected, part("<|speaker:0|>Say this."));
    append(expected, part("<|im_end|>\n"));
    append(expected, part("<|im_start|>assistant\n<|voice|>"));
    EXPECT_EQ(prompt->ids, expected);

    ASSERT_EQ(prompt->vq_positions.size(), 5u);
    for (std::int64_t j = 0; j < 5; ++j) EXPECT_EQ(prompt->vq_positions[j], vq_begin + j);
    ASSERT_EQ(prompt->vq_codes.size(), 50u);
    EXPECT_EQ(prompt->num_codebooks, 10);
    // Frame 1 of reference 0 and frame 0 of reference 1, all ten codebooks.
    for (std::int64_t k = 0; k < 10; ++k) {
        const std::int64_t size = k == 0 ? 4096 : 1024;
        EXPECT_EQ(prompt->vq_codes[1 * 10 + k], (100 + 7 + 131 * k) % size) << k;
        EXPECT_EQ(prompt->vq_codes[3 * 10 + k], (4000 + 131 * k) % size) << k;
    }
    // fish-speech's packed row 1 equals row 0 - semantic_begin at VQ positions.
    for (std::int64_t j = 0; j < 5; ++j) {
        EXPECT_EQ(prompt->ids[prompt->vq_positions[j]] - 151678, prompt->vq_codes[j * 10]);
    }
}

TEST_F(S2ProPromptTest, SglangReferenceWithoutTextHasNoTextPart) {
    auto prompt = build_prompt(*tokenizer_, config_, "Hi", {{.text = "", .codes = codes(1, 9)}});
    ASSERT_TRUE(prompt.has_value());
    const PromptParts parts =
        prompt_parts("Hi", {{.text = "", .codes = codes(1, 9)}}, PromptStyle::sglang);
    ASSERT_EQ(parts.texts.size(), 9u);
    EXPECT_EQ(parts.vq_part, 3);
    EXPECT_EQ(parts.texts[2], "\n\nSpeech:\n");
    EXPECT_EQ(prompt->vq_positions.size(), 1u);
}

TEST_F(S2ProPromptTest, FishSpeechWithoutReferencesKeepsTheSystemMessage) {
    auto prompt =
        build_prompt(*tokenizer_, config_, "<|speaker:0|>Hello.", {}, PromptStyle::fish_speech);
    ASSERT_TRUE(prompt.has_value());
    std::vector<std::int32_t> expected;
    append(expected, part("<|im_start|>system\n"));
    append(expected, part("convert the provided text to speech"));
    append(expected, part("<|im_end|>\n"));
    append(expected, part("<|im_start|>user\n"));
    append(expected, part("<|speaker:0|>Hello."));  // not tagged again
    append(expected, part("<|im_end|>\n"));
    append(expected, part("<|im_start|>assistant\n<|voice|>"));
    EXPECT_EQ(prompt->ids, expected);
}

TEST_F(S2ProPromptTest, FishSpeechTagsReferencesByIndexAndJoinsThemInOnePart) {
    const std::vector<PromptReference> references = {
        {.text = "One.", .codes = codes(2, 1)},
        {.text = "<|speaker:5|>Two.", .codes = codes(1, 2)}};
    auto prompt = build_prompt(*tokenizer_, config_, "Go.", references, PromptStyle::fish_speech);
    ASSERT_TRUE(prompt.has_value());
    std::vector<std::int32_t> expected;
    append(expected, part("<|im_start|>system\n"));
    append(expected, part("convert the provided text to speech reference to the following:\n\n"
                          "Text:\n<|speaker:0|>One.\n<|speaker:5|>Two."));
    append(expected, part("\n\nSpeech:\n"));
    for (std::int32_t c0 : {1, 8, 2}) expected.push_back(151678 + c0);
    append(expected, part("<|im_end|>\n"));
    append(expected, part("<|im_start|>user\n"));
    append(expected, part("Go."));
    append(expected, part("<|im_end|>\n"));
    append(expected, part("<|im_start|>assistant\n<|voice|>"));
    EXPECT_EQ(prompt->ids, expected);
}

TEST_F(S2ProPromptTest, PartsAreTokenizedApart) {
    // "\n" + "\n\nSpeech" would merge differently if the parts were joined first; the builder's
    // ids are the parts' ids concatenated whatever BPE would do across the boundary.
    auto prompt = build_prompt(*tokenizer_, config_, "a", {{.text = "b", .codes = {}}});
    ASSERT_TRUE(prompt.has_value());
    std::vector<std::int32_t> expected;
    for (const std::string& text :
         prompt_parts("a", {{.text = "b", .codes = {}}}, PromptStyle::sglang).texts) {
        append(expected, part(text));
    }
    EXPECT_EQ(prompt->ids, expected);
}

TEST_F(S2ProPromptTest, MalformedCodesFailNamingTheReference) {
    CodeMatrix short_codes = codes(2, 0);
    short_codes.codes.pop_back();
    CodeMatrix nine = codes(2, 0);
    nine.codebooks = 9;
    nine.codes.resize(18);
    CodeMatrix big = codes(2, 0);
    big.codes[0] = 4096;
    CodeMatrix negative = codes(2, 0);
    negative.codes[5] = -1;
    for (const CodeMatrix& bad : {short_codes, nine, big, negative}) {
        auto prompt =
            build_prompt(*tokenizer_, config_, "x",
                         {{.text = "ok", .codes = codes(1, 0)}, {.text = "", .codes = bad}});
        ASSERT_FALSE(prompt.has_value());
        EXPECT_EQ(prompt.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(prompt.error().message.find("reference 1"), std::string::npos)
            << prompt.error().message;
    }
    auto not_utf8 = build_prompt(*tokenizer_, config_, std::string("\xff\xfe"), {});
    ASSERT_FALSE(not_utf8.has_value());
}

}  // namespace
}  // namespace omnirt::models::s2_pro

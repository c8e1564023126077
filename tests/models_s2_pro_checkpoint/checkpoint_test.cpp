// Generated S2-Pro checkpoints: the released layout (nested config.json, sharded safetensors with
// an index and the real tensor names, a tokenizer with the special tokens at their real ids),
// detected as the s2_pro family; a checkpoint that does not match its config is reported by name.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/test_support.h"
#include "models/builtin_families.h"
#include "models/s2_pro/make_checkpoint.h"
#include "models/s2_pro/weights.h"
#include "text/tokenizer.h"

namespace omnirt::models::s2_pro {
namespace {

using checkpoint::testing::TempDir;

TEST(S2ProCheckpointTest, TinyCheckpointHasTheReleasedLayout) {
    TempDir dir;
    auto made = make_checkpoint(dir.path(), {.preset = "tiny", .seed = 3});
    ASSERT_TRUE(made.has_value()) << made.error().to_string();
    for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json",
                             "model.safetensors.index.json"}) {
        EXPECT_TRUE(std::filesystem::exists(dir / file)) << file;
    }
    auto opened = checkpoint::Checkpoint::open(dir.path());
    ASSERT_TRUE(opened.has_value()) << opened.error().to_string();
    EXPECT_TRUE((*opened)->sharded());
    EXPECT_GT((*opened)->files().size(), 1u);
    auto config = load_s2_pro_config(**opened);
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_TRUE(check_s2_pro_checkpoint(*config, **opened).has_value());
    EXPECT_EQ((*opened)->tensor_count(), s2_pro_expected_tensors(*config).size());
    auto info = (*opened)->info("audio_decoder.codebook_embeddings.weight");
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->dtype, DType::bf16);
    EXPECT_EQ(info->shape, (Shape{40960, 64}));

    auto family = builtin_families().detect_directory(dir.path());
    ASSERT_TRUE(family.has_value()) << family.error().to_string();
    EXPECT_EQ((*family)->name, "s2_pro");
}

TEST(S2ProCheckpointTest, TokenizerHasTheSpecialTokensAtTheirRealIds) {
    TempDir dir;
    ASSERT_TRUE(make_checkpoint(dir.path(), {.preset = "tiny"}).has_value());
    auto tokenizer = text::Tokenizer::from_file((dir / "tokenizer.json").string());
    ASSERT_TRUE(tokenizer.has_value()) << tokenizer.error().to_string();
    const std::pair<const char*, int> expected[] = {
        {"<|endoftext|>", 151643},   {"<|im_start|>", 151644},      {"<|im_end|>", 151645},
        {"<|pad|>", 151669},         {"<|phoneme_start|>", 151670}, {"<|phoneme_end|>", 151671},
        {"<|text|>", 151672},        {"<|voice|>", 151673},         {"<|interleave|>", 151674},
        {"<|audio_start|>", 151675}, {"<|audio_end|>", 151676},     {"<|audio_pad|>", 151677},
        {"<|semantic:0|>", 151678},  {"<|semantic:17|>", 151695},   {"<|semantic:4095|>", 155773}};
    for (const auto& [content, id] : expected) {
        EXPECT_EQ((*tokenizer)->token_to_id(content), std::optional<text::TokenId>(id)) << content;
        EXPECT_TRUE((*tokenizer)->is_special(id)) << content;
    }
    EXPECT_EQ((*tokenizer)->vocab_size(), 155774u);
    // Written in text, a special token is one id; a speaker tag is plain BPE.
    auto ids = (*tokenizer)->encode("<|im_start|>user\n<|semantic:5|>", false);
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(ids->front(), 151644);
    EXPECT_EQ(ids->back(), 151683);
    auto speaker = (*tokenizer)->encode("<|speaker:0|>", false);
    ASSERT_TRUE(speaker.has_value());
    EXPECT_GT(speaker->size(), 1u);
    for (text::TokenId id : *speaker) EXPECT_LT(id, 151643);
}

TEST(S2ProCheckpointTest, SameSeedSameWeightsOtherSeedOtherWeights) {
    TempDir a, b;
    ASSERT_TRUE(make_checkpoint(a / "x", {.preset = "tiny", .seed = 1}).has_value());
    ASSERT_TRUE(make_checkpoint(a / "y", {.preset = "tiny", .seed = 1}).has_value());
    ASSERT_TRUE(make_checkpoint(b / "z", {.preset = "tiny", .seed = 2}).has_value());
    auto x = checkpoint::Checkpoint::open(a / "x");
    auto y = checkpoint::Checkpoint::open(a / "y");
    auto z = checkpoint::Checkpoint::open(b / "z");
    ASSERT_TRUE(x && y && z);
    const std::string name = "audio_decoder.layers.1.attention.wqkv.weight";
    auto tx = (*x)->tensor(name), ty = (*y)->tensor(name), tz = (*z)->tensor(name);
    ASSERT_TRUE(tx && ty && tz);
    EXPECT_EQ(std::memcmp(tx->data(), ty->data(), tx->nbytes()), 0);
    EXPECT_NE(std::memcmp(tx->data(), tz->data(), tx->nbytes()), 0);
}

TEST(S2ProCheckpointTest, MismatchedCheckpointIsReportedByName) {
    TempDir dir;
    ASSERT_TRUE(make_checkpoint(dir.path(), {.preset = "tiny"}).has_value());
    auto opened = checkpoint::Checkpoint::open(dir.path());
    ASSERT_TRUE(opened.has_value());
    auto config = load_s2_pro_config(**opened);
    ASSERT_TRUE(config.has_value());
    S2ProConfig other = *config;
    other.audio.n_layer = 3;                 // one layer more than the file
    other.text.tie_word_embeddings = false;  // wants an output head
    other.text.intermediate_size = 96;       // every MLP weight has another shape
    auto status = check_s2_pro_checkpoint(other, **opened);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::failed_precondition);
    const std::string& message = status.error().message;
    EXPECT_NE(message.find("audio_decoder.layers.2.attention.wqkv.weight"), std::string::npos)
        << message;
    EXPECT_NE(message.find("text_model.model.output.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("feed_forward.w1.weight"), std::string::npos) << message;
}

TEST(S2ProCheckpointTest, RefusesWhatItCannotWrite) {
    TempDir dir;
    auto unknown = make_checkpoint(dir / "a", {.preset = "medium"});
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
    auto dtype = make_checkpoint(dir / "b", {.preset = "tiny", .dtype = DType::i32});
    ASSERT_FALSE(dtype.has_value());
    EXPECT_EQ(dtype.error().code, ErrorCode::invalid_argument);
    ASSERT_TRUE(make_checkpoint(dir / "c", {.preset = "tiny"}).has_value());
    auto again = make_checkpoint(dir / "c", {.preset = "tiny"});
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code, ErrorCode::already_exists);
    EXPECT_TRUE(make_checkpoint(dir / "c", {.preset = "tiny", .overwrite = true}).has_value());
}

TEST(S2ProCheckpointTest, FamilyIsRegisteredWithItsPresets) {
    auto family = builtin_families().find("fish_qwen3_omni");
    ASSERT_TRUE(family.has_value()) << family.error().to_string();
    EXPECT_EQ((*family)->name, "s2_pro");
    auto config = (*family)->preset_config("s2-pro", "bfloat16");
    ASSERT_TRUE(config.has_value());
    auto footprint = (*family)->decode_footprint(*config);
    ASSERT_TRUE(footprint.has_value()) << footprint.error().to_string();
    EXPECT_EQ(footprint->parameters, 4561852416);
    EXPECT_EQ(footprint->kv_elements_per_token, 2 * 36 * 8 * 128);
}

}  // namespace
}  // namespace omnirt::models::s2_pro

// Black-box tests of `omnirt make-checkpoint`: the real binary writes a checkpoint that
// Checkpoint::open and the Qwen3 checks accept.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/test_support.h"
#include "models/qwen3/make_checkpoint.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "models/qwen3/weights.h"
#include "support/command.h"

namespace omnirt::models::qwen3 {
namespace {

using checkpoint::testing::TempDir;
using omnirt::testing::omnirt_binary;
using omnirt::testing::run_command;
using ::testing::HasSubstr;

omnirt::testing::CommandResult make(std::vector<std::string> args) {
    args.insert(args.begin(), {omnirt_binary(), "make-checkpoint", "--arch", "qwen3"});
    return run_command(args);
}

std::uint64_t fnv1a(const std::vector<std::byte>& bytes) {
    std::uint64_t hash = 0xCBF29CE484222325ull;
    for (std::byte b : bytes) {
        hash ^= std::to_integer<std::uint64_t>(b);
        hash *= 0x100000001B3ull;
    }
    return hash;
}

// Opens `directory` and runs every check a loader would.
void expect_valid_checkpoint(const std::filesystem::path& directory, bool moe, DType dtype) {
    auto opened = checkpoint::Checkpoint::open(directory);
    ASSERT_TRUE(opened) << opened.error().to_string();
    auto config = load_config(**opened);
    ASSERT_TRUE(config) << config.error().to_string();
    EXPECT_EQ(config->is_moe(), moe);
    EXPECT_EQ(config->weight_dtype(), dtype);
    auto matches = check_checkpoint(*config, **opened);
    EXPECT_TRUE(matches) << matches.error().to_string();
    for (const std::string& name : (*opened)->tensor_names()) {
        EXPECT_EQ((*opened)->find(name)->dtype, dtype) << name;
    }
    // The tokenizer files parse, and the model covers the tokenizer's ids.
    auto tokenizer = checkpoint::read_json_file(directory / "tokenizer.json");
    ASSERT_TRUE(tokenizer);
    const auto& added = (*tokenizer)["added_tokens"];
    EXPECT_LT(added.back()["id"].get<std::int64_t>(), config->vocab_size);
    EXPECT_EQ(config->eos_token_ids, std::vector<std::int64_t>{tiny_tokenizer_ids().im_end});
    auto tokenizer_config = checkpoint::read_json_file(directory / "tokenizer_config.json");
    ASSERT_TRUE(tokenizer_config);
    EXPECT_TRUE((*tokenizer_config)["chat_template"].is_string());
    auto generation = checkpoint::read_json_file(directory / "generation_config.json");
    ASSERT_TRUE(generation);
    EXPECT_EQ((*generation)["eos_token_id"][0], tiny_tokenizer_ids().im_end);
}

TEST(MakeCheckpoint, TinyDense) {
    TempDir dir;
    auto result = make({"--preset", "tiny", "--out", (dir / "tiny").string()});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_THAT(result.out, HasSubstr("qwen3 tiny, 24 tensors"));
    expect_valid_checkpoint(dir / "tiny", false, DType::bf16);
    EXPECT_TRUE(std::filesystem::exists(dir / "tiny" / "model.safetensors"));
    EXPECT_FALSE(std::filesystem::exists(dir / "tiny" / "model.safetensors.index.json"));
    // Pinned bytes: generated checkpoints are the same on every machine and run.
    EXPECT_EQ(fnv1a(checkpoint::testing::read_bytes(dir / "tiny" / "model.safetensors")),
              4618942121489528333ull);
}

TEST(MakeCheckpoint, TinyMoeF32) {
    TempDir dir;
    auto result = make({"--preset", "tiny", "--moe", "--dtype", "f32", "--seed", "3", "--out",
                        (dir / "moe").string()});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    expect_valid_checkpoint(dir / "moe", true, DType::f32);
    auto opened = *checkpoint::Checkpoint::open(dir / "moe");
    EXPECT_TRUE(opened->contains("model.layers.1.mlp.experts.3.down_proj.weight"));
    EXPECT_TRUE(opened->contains("lm_head.weight"));
}

TEST(MakeCheckpoint, SeedsAreDeterministic) {
    TempDir dir;
    for (const char* name : {"a", "b"}) {
        ASSERT_EQ(
            make({"--preset", "tiny", "--seed", "11", "--quiet", "--out", (dir / name).string()})
                .exit_code,
            0);
    }
    ASSERT_EQ(make({"--preset", "tiny", "--seed", "12", "--quiet", "--out", (dir / "c").string()})
                  .exit_code,
              0);
    const auto a = checkpoint::testing::read_bytes(dir / "a" / "model.safetensors");
    EXPECT_EQ(a, checkpoint::testing::read_bytes(dir / "b" / "model.safetensors"));
    EXPECT_NE(a, checkpoint::testing::read_bytes(dir / "c" / "model.safetensors"));
}

TEST(MakeCheckpoint, ShardsAboveTheLimitAndForceReplaces) {
    TempDir dir;
    const std::string out = (dir / "sharded").string();
    auto result = make({"--preset", "tiny", "--moe", "--max-shard-size", "64K", "--out", out});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_TRUE(std::filesystem::exists(dir / "sharded" / "model.safetensors.index.json"));
    expect_valid_checkpoint(out, true, DType::bf16);
    EXPECT_GT((*checkpoint::Checkpoint::open(out))->files().size(), 2u);

    auto refused = make({"--preset", "tiny", "--out", out});
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_THAT(refused.err, HasSubstr("is not empty"));
    // --force replaces the sharded layout by a single file; no stale shard is left behind.
    auto forced = make({"--preset", "tiny", "--force", "--quiet", "--out", out});
    ASSERT_EQ(forced.exit_code, 0) << forced.err;
    for (const auto& entry : std::filesystem::directory_iterator(out)) {
        EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr("-of-")));
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "sharded" / "model.safetensors.index.json"));
    expect_valid_checkpoint(out, false, DType::bf16);
}

TEST(MakeCheckpoint, UsageErrors) {
    TempDir dir;
    const std::string out = (dir / "x").string();
    EXPECT_EQ(make({"--preset", "huge", "--out", out}).exit_code, 2);
    EXPECT_EQ(make({"--out", out}).exit_code, 2);
    auto moe = make({"--preset", "0.6b", "--moe", "--out", out});
    EXPECT_EQ(moe.exit_code, 2);
    EXPECT_THAT(moe.err, HasSubstr("no MoE variant"));
    auto dtype = make({"--preset", "tiny", "--dtype", "int8", "--out", out});
    EXPECT_EQ(dtype.exit_code, 2);
    EXPECT_THAT(dtype.err, HasSubstr("--dtype: expected bf16, f16 or f32"));
    auto shard = make({"--preset", "tiny", "--max-shard-size", "0", "--out", out});
    EXPECT_EQ(shard.exit_code, 2);
    EXPECT_THAT(shard.err, HasSubstr("--max-shard-size"));
    EXPECT_FALSE(std::filesystem::exists(out));
}

// The library entry point, in process (what tests of the model layers call).
TEST(MakeCheckpoint, InProcessWithProgress) {
    TempDir dir;
    std::vector<checkpoint::Progress> progress;
    auto made = make_checkpoint(
        dir / "p", {.preset = "tiny",
                    .moe = true,
                    .dtype = DType::f16,
                    .progress = [&](const checkpoint::Progress& p) { progress.push_back(p); }});
    ASSERT_TRUE(made) << made.error().to_string();
    EXPECT_EQ(made->weights.tensor_count, expected_tensors(made->config).size());
    ASSERT_FALSE(progress.empty());
    EXPECT_EQ(progress.back().tensors_done, made->weights.tensor_count);
    EXPECT_EQ(progress.back().bytes_done, made->weights.tensor_bytes);
    expect_valid_checkpoint(dir / "p", true, DType::f16);
}

}  // namespace
}  // namespace omnirt::models::qwen3

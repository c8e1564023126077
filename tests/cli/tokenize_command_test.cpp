// Black-box tests of `omnirt tokenize` on the real binary, over a generated tiny checkpoint.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>

#include "support/command.h"

namespace omnirt::testing {
namespace {

class TokenizeCommand : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::path(::testing::TempDir()) /
               ("omnirt-tokenize-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir_);
        auto made = run_command({omnirt_binary(), "make-checkpoint", "--arch", "qwen3", "--preset",
                                 "tiny", "--out", dir_.string(), "--quiet"});
        ASSERT_EQ(made.exit_code, 0) << made.err;
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::filesystem::path dir_;
};

TEST_F(TokenizeCommand, EncodesAndDecodesBack) {
    const std::string text = "hello <|im_start|>user, ünïcödé 😀";
    auto encoded = run_command({omnirt_binary(), "tokenize", "--model-path", dir_.string(), text});
    ASSERT_EQ(encoded.exit_code, 0) << encoded.err;
    auto ids = nlohmann::json::parse(encoded.out);
    ASSERT_TRUE(ids.is_array());
    ASSERT_FALSE(ids.empty());
    std::vector<std::string> argv = {omnirt_binary(), "tokenize", "--model-path", dir_.string(),
                                     "--decode"};
    for (const auto& id : ids) argv.push_back(std::to_string(id.get<int>()));
    auto decoded = run_command(argv);
    ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
    EXPECT_EQ(nlohmann::json::parse(decoded.out), text);
}

TEST_F(TokenizeCommand, SpecialTokensCanBeTakenAsPlainText) {
    auto special =
        run_command({omnirt_binary(), "tokenize", "--model-path", dir_.string(), "<|im_start|>"});
    auto plain = run_command({omnirt_binary(), "tokenize", "--model-path", dir_.string(),
                              "--no-special", "<|im_start|>"});
    ASSERT_EQ(special.exit_code, 0);
    ASSERT_EQ(plain.exit_code, 0);
    EXPECT_EQ(nlohmann::json::parse(special.out).size(), 1u);
    EXPECT_GT(nlohmann::json::parse(plain.out).size(), 1u);
}

TEST_F(TokenizeCommand, BadInputsAreClearErrors) {
    auto not_an_id = run_command(
        {omnirt_binary(), "tokenize", "--model-path", dir_.string(), "--decode", "12x"});
    EXPECT_EQ(not_an_id.exit_code, 2);
    EXPECT_NE(not_an_id.err.find("'12x' is not a token id"), std::string::npos) << not_an_id.err;
    auto out_of_vocab = run_command(
        {omnirt_binary(), "tokenize", "--model-path", dir_.string(), "--decode", "999999"});
    EXPECT_EQ(out_of_vocab.exit_code, 1);
    EXPECT_NE(out_of_vocab.err.find("out_of_range"), std::string::npos) << out_of_vocab.err;
    auto missing = run_command({omnirt_binary(), "tokenize", "--model-path", "/nonexistent", "x"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("/nonexistent/tokenizer.json"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace omnirt::testing

// Black-box tests of how `omnirt serve` picks its pipeline, and of the start-up failures that
// must end with a clear message instead of a server (a successful start is tests/e2e's).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "support/command.h"

namespace omnirt::testing {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

TEST(ServeCommand, DemoAndConfigExcludeEachOther) {
    auto result = run_command({omnirt_binary(), "serve", "--demo", "--config",
                               source_path("configs/demo.yaml"), "--port", "0"});
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_TRUE(contains(result.err, "excludes")) << result.err;
}

TEST(ServeCommand, StreamMarksMustBeOrdered) {
    auto result = run_command({omnirt_binary(), "serve", "--demo", "--port", "0",
                               "--stream-high-water-kib", "64", "--stream-low-water-kib", "128"});
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_TRUE(contains(result.err,
                         "--stream-low-water-kib (128) must not exceed "
                         "--stream-high-water-kib (64)"))
        << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;  // never "listening"
    auto zero = run_command(
        {omnirt_binary(), "serve", "--demo", "--port", "0", "--stream-stall-timeout", "0"});
    EXPECT_EQ(zero.exit_code, 2) << zero.err;  // a usage error of the flag's range
}

TEST(ServeCommand, MissingPluginIsAClearError) {
    auto result = run_command({"/usr/bin/env", "OMNIRT_QWEN3_OMNI_PLUGIN=/nonexistent/plugin.so",
                               omnirt_binary(), "serve", "--port", "0"});
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_TRUE(contains(result.err, "OMNIRT_QWEN3_OMNI_PLUGIN names /nonexistent/plugin.so"))
        << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;  // never "listening"
}

TEST(ServeCommand, UnwritableCacheIsAClearError) {
    // The default (tiny) checkpoint cannot be written below a regular file.
    const fs::path file =
        fs::path(::testing::TempDir()) / ("omnirt-serve-cache-" + std::to_string(::getpid()));
    {
        std::FILE* f = std::fopen(file.c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fclose(f);
    }
    auto result = run_command({"/usr/bin/env", "OMNIRT_CACHE_DIR=" + (file / "cache").string(),
                               omnirt_binary(), "serve", "--port", "0"});
    fs::remove(file);
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_TRUE(contains(result.err, "for the default checkpoint")) << result.err;
}

TEST(ServeCommand, ABadModelPathFailsBeforeListening) {
    const fs::path empty =
        fs::path(::testing::TempDir()) / ("omnirt-serve-empty-" + std::to_string(::getpid()));
    fs::create_directories(empty);
    auto result = run_command({omnirt_binary(), "serve", "--port", "0", "--model-path",
                               empty.string(), "--log-level", "off"});
    fs::remove_all(empty);
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_TRUE(contains(result.err, "omnirt serve:")) << result.err;
    EXPECT_TRUE(contains(result.err, "config.json") || contains(result.err, "tokenizer.json"))
        << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
}

}  // namespace
}  // namespace omnirt::testing

// The playground's embedded files: every file under src/serve/playground/web/ is in the binary,
// byte for byte, with a content type a browser accepts.
#include "serve/playground/assets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

namespace omnirt::serve::playground {
namespace {

namespace fs = std::filesystem;

const fs::path kWebDir = fs::path(OMNIRT_SOURCE_DIR) / "src" / "serve" / "playground" / "web";

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(PlaygroundAssets, EveryWebFileIsEmbeddedByteForByte) {
    std::set<std::string> on_disk;
    for (const auto& entry : fs::recursive_directory_iterator(kWebDir)) {
        if (entry.is_regular_file()) {
            on_disk.insert(entry.path().lexically_relative(kWebDir).generic_string());
        }
    }
    std::set<std::string> embedded;
    for (const EmbeddedFile& file : embedded_files()) {
        embedded.insert(std::string(file.path));
        EXPECT_EQ(file.bytes, read_file(kWebDir / std::string(file.path)))
            << file.path << " differs from the source tree (rebuild to re-embed it)";
    }
    EXPECT_EQ(embedded, on_disk);
    EXPECT_TRUE(embedded.contains("index.html"));
}

TEST(PlaygroundAssets, FilesAreSortedByPath) {
    auto files = embedded_files();
    for (std::size_t i = 1; i < files.size(); ++i) {
        EXPECT_LT(files[i - 1].path, files[i].path);
    }
}

TEST(PlaygroundAssets, ContentTypes) {
    EXPECT_EQ(content_type("index.html"), "text/html; charset=utf-8");
    EXPECT_EQ(content_type("app.js"), "text/javascript; charset=utf-8");
    EXPECT_EQ(content_type("playground.css"), "text/css; charset=utf-8");
    EXPECT_EQ(content_type("icon.svg"), "image/svg+xml");
    EXPECT_EQ(content_type("data.bin"), "application/octet-stream");
    EXPECT_EQ(content_type("js"), "application/octet-stream");
    for (const EmbeddedFile& file : embedded_files()) {
        EXPECT_NE(content_type(file.path), "application/octet-stream") << file.path;
    }
}

}  // namespace
}  // namespace omnirt::serve::playground

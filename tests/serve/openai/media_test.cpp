#include "serve/openai/media.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "serve/openai/base64.h"

namespace omnirt::serve::openai {
namespace {

namespace fs = std::filesystem;

class MediaTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "omnirt_media_XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        root_ = pattern;
        fs::create_directories(root_ / "allowed" / "sub");
        write(root_ / "allowed" / "cat.png", "png!");
        write(root_ / "allowed" / "sub" / "clip.WAV", "wav!");
        write(root_ / "secret.png", "secret");
        fs::create_symlink(root_ / "secret.png", root_ / "allowed" / "escape.png");
        fs::create_symlink(root_ / "allowed" / "cat.png", root_ / "allowed" / "inside.png");
        policy_.allowed_local_dir = (root_ / "allowed").string();
    }
    void TearDown() override { fs::remove_all(root_); }

    static void write(const fs::path& path, std::string_view text) { std::ofstream(path) << text; }

    ProtocolResult<MediaInput> resolve(std::string_view url, MediaKind kind = MediaKind::image) {
        return resolve_media_url(url, kind, policy_, limits_, "p.url");
    }

    fs::path root_;
    MediaPolicy policy_;
    RequestLimits limits_;
};

TEST_F(MediaTest, DataUrlDecodes) {
    auto media = resolve("data:image/png;base64,aGVsbG8=");
    ASSERT_TRUE(media.has_value()) << media.error().message;
    EXPECT_EQ(media->kind, MediaKind::image);
    EXPECT_EQ(media->source, MediaSource::bytes);
    EXPECT_EQ(media->mime, "image/png");
    EXPECT_EQ(media->bytes, (std::vector<std::uint8_t>{'h', 'e', 'l', 'l', 'o'}));
}

TEST_F(MediaTest, DataUrlWithParametersAndUpperCase) {
    auto media = resolve("DATA:Audio/WAV;rate=16000;BASE64,aGk=", MediaKind::audio);
    ASSERT_TRUE(media.has_value()) << media.error().message;
    EXPECT_EQ(media->mime, "audio/wav");
    EXPECT_EQ(media->bytes.size(), 2u);
}

TEST_F(MediaTest, DataUrlErrors) {
    struct Case {
        std::string url;
        MediaKind kind;
        std::string fragment;
    };
    const Case cases[] = {
        {"data:image/png;base64", MediaKind::image, "without a ','"},
        {"data:image/png,aGk=", MediaKind::image, "only base64"},
        {"data:;base64,aGk=", MediaKind::image, "valid media type"},
        {"data:image;base64,aGk=", MediaKind::image, "valid media type"},
        {"data:audio/wav;base64,aGk=", MediaKind::image, "expected image/*"},
        {"data:image/png;base64,aGk", MediaKind::image, "invalid base64"},
        {"data:image/png;base64,a Gk=", MediaKind::image, "invalid base64"},
        {"data:image/png;base64,", MediaKind::image, "no media bytes"},
        {"data:video/mp4;base64,@@@@", MediaKind::video, "invalid base64"},
    };
    for (const auto& c : cases) {
        auto media = resolve(c.url, c.kind);
        ASSERT_FALSE(media.has_value()) << c.url;
        EXPECT_EQ(media.error().http_status, 400) << c.url;
        EXPECT_EQ(media.error().param, "p.url");
        EXPECT_NE(media.error().message.find(c.fragment), std::string::npos)
            << c.url << ": " << media.error().message;
    }
}

TEST_F(MediaTest, OversizedPayloadIs413) {
    limits_.max_media_bytes = 4;
    auto media = resolve("data:image/png;base64," + base64_encode(std::vector<std::uint8_t>(5)));
    ASSERT_FALSE(media.has_value());
    EXPECT_EQ(media.error().http_status, 413);
    EXPECT_EQ(media.error().code, "media_too_large");
    auto big = resolve("data:image/png;base64," + std::string(4000, 'A'));
    ASSERT_FALSE(big.has_value());
    EXPECT_EQ(big.error().http_status, 413);
    EXPECT_TRUE(resolve("data:image/png;base64," + base64_encode(std::vector<std::uint8_t>(4)))
                    .has_value());
}

TEST_F(MediaTest, RemoteUrlsNeedThePolicy) {
    auto refused = resolve("https://example.com/cat.png");
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().http_status, 400);
    EXPECT_NE(refused.error().message.find("remote media URLs are disabled"), std::string::npos);
    EXPECT_FALSE(resolve("HTTP://example.com/cat.png").has_value());
    policy_.allow_remote = true;
    auto allowed = resolve("https://example.com/cat.png");
    ASSERT_TRUE(allowed.has_value());
    EXPECT_EQ(allowed->source, MediaSource::remote_url);
    EXPECT_EQ(allowed->url, "https://example.com/cat.png");
    EXPECT_TRUE(allowed->bytes.empty());
}

TEST_F(MediaTest, OtherSchemesAndEmptyAreRejected) {
    for (const std::string_view url : {"", "ftp://x/y.png", "javascript:alert(1)", "s3://b/k"}) {
        auto media = resolve(url);
        ASSERT_FALSE(media.has_value()) << url;
        EXPECT_EQ(media.error().http_status, 400);
    }
}

TEST_F(MediaTest, LocalPathsDisabledByDefault) {
    policy_.allowed_local_dir.clear();
    auto media = resolve((root_ / "allowed" / "cat.png").string());
    ASSERT_FALSE(media.has_value());
    EXPECT_NE(media.error().message.find("local media paths are disabled"), std::string::npos);
}

TEST_F(MediaTest, LocalPathsInsideTheDirectory) {
    const std::string cat = fs::canonical(root_ / "allowed" / "cat.png").string();
    auto absolute = resolve((root_ / "allowed" / "cat.png").string());
    ASSERT_TRUE(absolute.has_value()) << absolute.error().message;
    EXPECT_EQ(absolute->source, MediaSource::path);
    EXPECT_EQ(absolute->path, cat);
    EXPECT_EQ(absolute->mime, "image/png");

    auto file_url = resolve("file://" + (root_ / "allowed" / "cat.png").string());
    ASSERT_TRUE(file_url.has_value()) << file_url.error().message;
    EXPECT_EQ(file_url->path, cat);

    auto relative = resolve("sub/clip.WAV", MediaKind::audio);
    ASSERT_TRUE(relative.has_value()) << relative.error().message;
    EXPECT_EQ(relative->mime, "audio/wav");

    auto escaped = resolve("file://" + (root_ / "allowed").string() + "/c%61t.png");
    ASSERT_TRUE(escaped.has_value()) << escaped.error().message;
    EXPECT_EQ(escaped->path, cat);

    auto symlink_inside = resolve("inside.png");
    ASSERT_TRUE(symlink_inside.has_value());
    EXPECT_EQ(symlink_inside->path, cat);

    // An image path with an audio extension keeps a neutral type.
    auto mismatch = resolve("sub/clip.WAV", MediaKind::image);
    ASSERT_TRUE(mismatch.has_value());
    EXPECT_EQ(mismatch->mime, "application/octet-stream");
}

TEST_F(MediaTest, LocalPathEscapesAreRejected) {
    const std::string allowed = (root_ / "allowed").string();
    for (const std::string& url : {
             allowed + "/../secret.png",                  // '..' component
             std::string("../secret.png"),                // relative escape
             allowed + "/sub/../cat.png",                 // '..' even when it stays inside
             allowed + "/escape.png",                     // symlink leaving the directory
             (root_ / "secret.png").string(),             // plainly outside
             allowed + "/missing.png",                    // missing
             allowed + "/sub",                            // a directory
             "file://" + allowed + "/%2e%2e/secret.png",  // encoded '..'
             std::string("file://relative/cat.png"),      // not absolute
             "file://" + allowed + "/cat.png%",           // truncated escape
             "file://" + allowed + "/cat%zz.png",         // bad escape
             std::string("/etc/passwd"),
         }) {
        auto media = resolve(url);
        ASSERT_FALSE(media.has_value()) << url;
        EXPECT_EQ(media.error().http_status, 400) << url;
        EXPECT_EQ(media.error().param, "p.url");
    }
    // Outside-the-directory and missing files read the same.
    EXPECT_EQ(resolve(allowed + "/escape.png").error().message,
              resolve(allowed + "/missing.png").error().message);
}

TEST_F(MediaTest, PathLikeAllowedDirWithSamePrefixIsOutside) {
    fs::create_directories(root_ / "allowed2");
    write(root_ / "allowed2" / "x.png", "x");
    EXPECT_FALSE(resolve((root_ / "allowed2" / "x.png").string()).has_value());
}

TEST_F(MediaTest, MissingAllowedDirIsAServerError) {
    policy_.allowed_local_dir = (root_ / "nope").string();
    auto media = resolve("cat.png");
    ASSERT_FALSE(media.has_value());
    EXPECT_EQ(media.error().http_status, 500);
}

TEST_F(MediaTest, InputAudio) {
    auto media = decode_input_audio("aGk=", "mp3", limits_, "messages[0].content[0].input_audio");
    ASSERT_TRUE(media.has_value());
    EXPECT_EQ(media->mime, "audio/mpeg");
    EXPECT_EQ(media->kind, MediaKind::audio);
    auto format = decode_input_audio("aGk=", "aac", limits_, "a");
    ASSERT_FALSE(format.has_value());
    EXPECT_EQ(format.error().param, "a.format");
    auto data = decode_input_audio("aGk", "wav", limits_, "a");
    ASSERT_FALSE(data.has_value());
    EXPECT_EQ(data.error().param, "a.data");
    auto prefixed = decode_input_audio("data:audio/wav;base64,aGk=", "wav", limits_, "a");
    EXPECT_FALSE(prefixed.has_value());
}

TEST(MediaNames, ToString) {
    EXPECT_EQ(to_string(MediaKind::video), "video");
    EXPECT_EQ(to_string(MediaSource::remote_url), "remote_url");
}

}  // namespace
}  // namespace omnirt::serve::openai

// Saved reference voices (--voices-dir): the directory layout, every malformed or hostile file
// a load refuses, and how a request's `voice` resolves against presets and saved voices.
#include "serve/api/saved_voices.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "media/audio.h"

namespace omnirt::serve::api {
namespace {

namespace fs = std::filesystem;

std::string wav_bytes(int frames = 4410) {
    media::AudioBuffer buffer{.sample_rate = 44100, .channels = 1};
    for (int i = 0; i < frames; ++i) {
        buffer.samples.push_back(0.3f * static_cast<float>(std::sin(0.05 * i)));
    }
    auto bytes = media::encode_audio(buffer, media::AudioFormat::wav);
    EXPECT_TRUE(bytes.has_value());
    return bytes.value_or("");
}

class SavedVoicesTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("omnirt_saved_voices_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    void write(const std::string& name, const std::string& bytes) {
        std::ofstream(dir_ / name, std::ios::binary) << bytes;
    }
    Result<std::shared_ptr<const SavedVoices>> load(openai::RequestLimits limits = {}) {
        return SavedVoices::load(dir_, limits);
    }
    void expect_load_error(const std::string& needle, openai::RequestLimits limits = {}) {
        auto voices = load(limits);
        ASSERT_FALSE(voices.has_value()) << "expected an error containing " << needle;
        EXPECT_NE(voices.error().message.find(needle), std::string::npos) << voices.error().message;
    }

    fs::path dir_;
};

TEST_F(SavedVoicesTest, LoadsAudioAndCodesVoicesAndIgnoresOtherFiles) {
    const std::string wav = wav_bytes();
    write("alice.wav", wav);
    write("alice.txt", "Hello from Alice.");
    write("bob-2.codes.json", "[[1, 2, 3], [4, 5, 6]]");
    write("bob-2.txt", "");
    write("README.md", "not a voice");
    write(".hidden.wav", "not a voice either");
    auto voices = load();
    ASSERT_TRUE(voices.has_value()) << voices.error().to_string();
    EXPECT_EQ((*voices)->names(), (std::vector<std::string>{"alice", "bob-2"}));
    const openai::SpeechReference* alice = (*voices)->find("ALICE");
    ASSERT_NE(alice, nullptr);
    EXPECT_EQ(alice->text, "Hello from Alice.");
    ASSERT_TRUE(alice->audio.has_value());
    EXPECT_EQ(alice->audio->source, openai::MediaSource::bytes);
    EXPECT_EQ(std::string(alice->audio->bytes.begin(), alice->audio->bytes.end()), wav);
    const openai::SpeechReference* bob = (*voices)->find("bob-2");
    ASSERT_NE(bob, nullptr);
    EXPECT_FALSE(bob->audio.has_value());
    EXPECT_EQ(bob->vq_codes, (std::vector<std::vector<std::int64_t>>{{1, 2, 3}, {4, 5, 6}}));
    EXPECT_EQ((*voices)->find("carol"), nullptr);
}

TEST_F(SavedVoicesTest, EmptyDirectoryHasNoVoices) {
    auto voices = load();
    ASSERT_TRUE(voices.has_value());
    EXPECT_EQ((*voices)->size(), 0u);
}

TEST_F(SavedVoicesTest, RefusesIncompleteOrAmbiguousVoices) {
    write("alice.wav", wav_bytes());
    expect_load_error("alice.txt (the transcript of its audio) is missing");
    fs::remove(dir_ / "alice.wav");
    write("alice.txt", "text only");
    expect_load_error("needs exactly one audio file");
    write("alice.wav", wav_bytes());
    write("alice.flac", wav_bytes());
    expect_load_error("needs exactly one audio file");
    fs::remove(dir_ / "alice.flac");
    write("alice.codes.json", "[[1]]");
    expect_load_error("needs exactly one audio file");
}

TEST_F(SavedVoicesTest, RefusesMalformedFiles) {
    write("alice.txt", "hi");
    write("alice.wav", "RIFF but not really a wave file");
    expect_load_error("alice.wav: not audio this server decodes");
    fs::remove(dir_ / "alice.wav");
    write("alice.wav", "");
    expect_load_error("alice.wav: not audio");
    fs::remove(dir_ / "alice.wav");
    for (const char* codes : {"not json", "[]", "[[1, 2], [3]]", "[[-1]]", "[[1.5]]", "{\"a\": 1}",
                              "[[1099511627776]]"}) {
        write("alice.codes.json", codes);
        expect_load_error("alice.codes.json");
    }
    write("alice.codes.json", "[[1]]");
    write("alice.txt", std::string("bad \xff\xfe utf-8"));
    expect_load_error("alice.txt: not UTF-8");
}

TEST_F(SavedVoicesTest, RefusesOversizedFiles) {
    write("alice.txt", "hi");
    write("alice.wav", wav_bytes(44100));
    openai::RequestLimits limits;
    limits.max_media_bytes = 1000;
    expect_load_error("more than the 1000 allowed", limits);
    limits = {};
    limits.max_string_bytes = 1;
    expect_load_error("alice.txt: 2 bytes, more than the 1 allowed", limits);
}

TEST_F(SavedVoicesTest, RefusesFileNamesThatBreakTheNameRule) {
    for (const std::string& file :
         std::vector<std::string>{"Alice.wav", "al ice.txt", "_alice.wav", "al.ice.wav",
                                  std::string(65, 'a') + ".wav", "-x.codes.json"}) {
        write(file, "x");
        expect_load_error("a voice name is 1 to 64 lower-case letters");
        fs::remove(dir_ / file);
    }
    write(std::string(64, 'a') + ".txt", "long but allowed");
    write(std::string(64, 'a') + ".codes.json", "[[7]]");
    EXPECT_TRUE(load().has_value());
}

TEST_F(SavedVoicesTest, RefusesDirectoriesAndMissingDirectory) {
    fs::create_directories(dir_ / "alice.wav");
    write("alice.txt", "hi");
    expect_load_error("alice.wav is not a regular file");
    auto missing = SavedVoices::load(dir_ / "nope", {});
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

TEST(VoiceNameTest, Rule) {
    EXPECT_TRUE(is_voice_name("alice"));
    EXPECT_TRUE(is_voice_name("0-x_y"));
    EXPECT_FALSE(is_voice_name(""));
    EXPECT_FALSE(is_voice_name("Alice"));
    EXPECT_FALSE(is_voice_name("../etc/passwd"));
    EXPECT_FALSE(is_voice_name("a/b"));
    EXPECT_FALSE(is_voice_name(std::string("a\0b", 3)));
    EXPECT_FALSE(is_voice_name(std::string(65, 'a')));
}

class ResolveVoiceTest : public SavedVoicesTest {
  protected:
    void SetUp() override {
        SavedVoicesTest::SetUp();
        write("alice.codes.json", "[[1, 2]]");
        write("alice.txt", "Alice speaking.");
        auto voices = load();
        ASSERT_TRUE(voices.has_value()) << voices.error().to_string();
        saved_ = *voices;
    }
    void expect_voice_error(const std::string& voice, const std::string& needle,
                            std::vector<openai::SpeechReference> references = {}) {
        auto resolved = resolve_speech_voice(voice, std::move(references), {"ethan"}, saved_.get());
        ASSERT_FALSE(resolved.has_value()) << voice;
        EXPECT_EQ(resolved.error().http_status, 400);
        EXPECT_EQ(resolved.error().param, "voice");
        EXPECT_NE(resolved.error().message.find(needle), std::string::npos)
            << resolved.error().message;
    }

    std::shared_ptr<const SavedVoices> saved_;
};

TEST_F(ResolveVoiceTest, SavedVoiceBecomesTheReference) {
    auto resolved = resolve_speech_voice("Alice", {}, {}, saved_.get());
    ASSERT_TRUE(resolved.has_value());
    ASSERT_EQ(resolved->size(), 1u);
    EXPECT_EQ((*resolved)[0].text, "Alice speaking.");
    EXPECT_EQ((*resolved)[0].vq_codes, (std::vector<std::vector<std::int64_t>>{{1, 2}}));
}

TEST_F(ResolveVoiceTest, PresetsAndAbsentVoicesPassThrough) {
    openai::SpeechReference given{.text = "given", .vq_codes = {{9}}};
    auto preset = resolve_speech_voice("Ethan", {given}, {"ethan"}, saved_.get());
    ASSERT_TRUE(preset.has_value());
    EXPECT_EQ(*preset, std::vector<openai::SpeechReference>{given});
    auto none = resolve_speech_voice("", {given}, {"ethan"}, saved_.get());
    ASSERT_TRUE(none.has_value());
    EXPECT_EQ(*none, std::vector<openai::SpeechReference>{given});
    // A server that knows no voice passes any name on (e.g. an OpenAI client's "alloy").
    auto open = resolve_speech_voice("alloy", {}, {}, nullptr);
    ASSERT_TRUE(open.has_value());
    EXPECT_TRUE(open->empty());
}

TEST_F(ResolveVoiceTest, UnknownHostileAndConflictingVoicesAre400s) {
    expect_voice_error("carol", "unknown voice 'carol' (this server has: ethan, alice)");
    expect_voice_error("../../etc/passwd", "'voice' must be 1 to 64");
    expect_voice_error(std::string(100, 'a'), "'voice' must be 1 to 64");
    expect_voice_error(std::string("alice\0", 6), "'voice' must be 1 to 64");
    expect_voice_error("alice", "exclude each other",
                       {openai::SpeechReference{.text = "t", .vq_codes = {{1}}}});
    // Presets only: unknown names are refused as well.
    auto resolved = resolve_speech_voice("carol", {}, {"ethan"}, nullptr);
    ASSERT_FALSE(resolved.has_value());
    EXPECT_EQ(resolved.error().param, "voice");
}

}  // namespace
}  // namespace omnirt::serve::api

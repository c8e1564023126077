// Reference voices of POST /v1/audio/speech (speech_references.h): every accepted form, how they
// reach the pipeline (inputs.references), and malformed or hostile values as 400s / 413s that
// name the field.
#include "serve/openai/speech_references.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serve/openai/base64.h"
#include "serve/openai/speech_request.h"

namespace omnirt::serve::openai {
namespace {

using Json = nlohmann::json;

const std::vector<std::uint8_t> kAudio = {'R', 'I', 'F', 'F', 1, 2, 3, 4, 'W', 'A', 'V', 'E'};

Json body(Json extra) {
    Json out{{"model", "s2"}, {"input", "Hello."}};
    for (auto& [key, value] : extra.items()) out[key] = value;
    return out;
}

ProtocolResult<SpeechRequest> parse(const Json& json, const MediaPolicy& media = {},
                                    RequestLimits limits = {}) {
    return parse_speech_request(json.dump(), limits, media);
}

void expect_error(const Json& json, const std::string& param, const std::string& fragment,
                  int status = 400, const MediaPolicy& media = {}, RequestLimits limits = {}) {
    auto result = parse(json, media, limits);
    ASSERT_FALSE(result.has_value()) << json.dump().substr(0, 300);
    EXPECT_EQ(result.error().http_status, status) << result.error().message;
    EXPECT_EQ(result.error().param, param) << result.error().message;
    EXPECT_NE(result.error().message.find(fragment), std::string::npos) << result.error().message;
}

TEST(SpeechReferences, NoneByDefaultAndNoInputsKey) {
    auto request = parse(body({}));
    ASSERT_TRUE(request.has_value());
    EXPECT_TRUE(request->references.empty());
    EXPECT_EQ(to_omni_request(*request).inputs.find("references"), nullptr);
}

TEST(SpeechReferences, Base64DataUrlAndCodes) {
    const std::string b64 = base64_encode(kAudio);
    auto request = parse(body({{"references",
                                {{{"text", "plain"}, {"audio", b64}},
                                 {{"text", "data url"}, {"audio", "data:audio/wav;base64," + b64}},
                                 {{"vq_codes", {{1, 2, 3}, {4, 5, 6}}}}}}}));
    ASSERT_TRUE(request.has_value()) << request.error().message;
    ASSERT_EQ(request->references.size(), 3u);
    EXPECT_EQ(request->references[0].audio->bytes, kAudio);
    EXPECT_EQ(request->references[1].audio->bytes, kAudio);
    EXPECT_EQ(request->references[2].vq_codes,
              (std::vector<std::vector<std::int64_t>>{{1, 2, 3}, {4, 5, 6}}));

    const Value inputs = to_omni_request(*request).inputs;
    const List& list = *inputs.find("references")->if_list();
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[0].find("text")->as_string(), "plain");
    EXPECT_EQ(list[0].find("audio")->if_bytes()->data, kAudio);
    EXPECT_EQ(list[1].find("text")->as_string(), "data url");
    const List& rows = *list[2].find("vq_codes")->if_list();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ((*rows[1].if_list())[2].as_int(), 6);
    EXPECT_EQ(list[2].find("text")->as_string(), "");
}

TEST(SpeechReferences, LegacyRefAudioAndRefText) {
    auto request = parse(body({{"ref_audio", base64_encode(kAudio)}, {"ref_text", "said"}}));
    ASSERT_TRUE(request.has_value()) << request.error().message;
    ASSERT_EQ(request->references.size(), 1u);
    EXPECT_EQ(request->references[0].text, "said");
    EXPECT_EQ(request->references[0].audio->bytes, kAudio);
    expect_error(body({{"ref_text", "said"}}), "ref_audio", "needs 'ref_audio'");
    expect_error(body({{"ref_audio", base64_encode(kAudio)}, {"references", Json::array()}}),
                 "references", "exclude each other");
}

TEST(SpeechReferences, PathsInsideTheAllowedDirectoryAndRemoteUrls) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("omnirt-speech-ref-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    { std::ofstream(dir / "voice.wav", std::ios::binary).write("RIFF....WAVE", 12); }
    const MediaPolicy allowed{.allowed_local_dir = dir.string(), .allow_remote = true};
    auto request = parse(body({{"references",
                                {{{"audio", (dir / "voice.wav").string()}},
                                 {{"audio", "https://example.com/voice.wav"}}}}}),
                         allowed);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    const Value inputs = to_omni_request(*request).inputs;
    const List& list = *inputs.find("references")->if_list();
    EXPECT_EQ(list[0].find("audio_path")->as_string(),
              std::filesystem::canonical(dir / "voice.wav").string());
    EXPECT_EQ(list[1].find("audio_url")->as_string(), "https://example.com/voice.wav");
    // Without the policy: no paths, no remote URLs.
    expect_error(body({{"references", {{{"audio", (dir / "voice.wav").string()}}}}}),
                 "references[0].audio", "");
    expect_error(body({{"references", {{{"audio", "https://example.com/voice.wav"}}}}}),
                 "references[0].audio", "");
    // Outside the allowed directory.
    expect_error(body({{"references", {{{"audio", "/etc/passwd"}}}}}), "references[0].audio", "",
                 400, allowed);
    std::filesystem::remove_all(dir);
}

// SGLang-Omni's benchmark client sends `ref_audio` as a path relative to the directory it runs
// in (a relative --testset): a short string with a '.' is a path, resolved inside the allowed
// directory; without one, with '..', or naming no file there it is a 400 on ref_audio.
TEST(SpeechReferences, RelativeRefAudioPathsResolveInsideTheAllowedDirectory) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("omnirt-speech-rel-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir / "en" / "prompt-wavs");
    { std::ofstream(dir / "en" / "prompt-wavs" / "a.wav", std::ios::binary).write("RIFF", 4); }
    const MediaPolicy allowed{.allowed_local_dir = dir.string()};
    auto request =
        parse(body({{"ref_audio", "en/prompt-wavs/a.wav"}, {"ref_text", "said"}}), allowed);
    ASSERT_TRUE(request.has_value()) << request.error().message;
    ASSERT_EQ(request->references.size(), 1u);
    ASSERT_TRUE(request->references[0].audio.has_value());
    EXPECT_EQ(request->references[0].audio->source, MediaSource::path);
    EXPECT_EQ(request->references[0].audio->path,
              std::filesystem::canonical(dir / "en" / "prompt-wavs" / "a.wav").string());
    EXPECT_EQ(request->references[0].text, "said");
    expect_error(body({{"ref_audio", "en/prompt-wavs/a.wav"}}), "ref_audio",
                 "local media paths are disabled");
    expect_error(body({{"ref_audio", "../a.wav"}}), "ref_audio", "'..'", 400, allowed);
    expect_error(body({{"ref_audio", "en/prompt-wavs/missing.wav"}}), "ref_audio",
                 "does not name a readable file", 400, allowed);
    expect_error(body({{"references", {{{"audio", "en/../../etc/passwd.x"}}}}}),
                 "references[0].audio", "'..'", 400, allowed);
    // Base64 has no '.': still the bytes it encodes, with the policy too.
    auto encoded = parse(body({{"ref_audio", base64_encode(kAudio)}}), allowed);
    ASSERT_TRUE(encoded.has_value()) << encoded.error().message;
    EXPECT_EQ(encoded->references[0].audio->bytes, kAudio);
    std::filesystem::remove_all(dir);
}

TEST(SpeechReferences, MalformedValuesNameTheField) {
    expect_error(body({{"references", "x"}}), "references", "list of at most 8");
    expect_error(body({{"references", Json::array({1})}}), "references[0]", "must be an object");
    expect_error(body({{"references", {{{"text", "t"}}}}}), "references[0]",
                 "exactly one of 'audio' and 'vq_codes'");
    expect_error(body({{"references", {{{"audio", base64_encode(kAudio)}, {"vq_codes", {{1}}}}}}}),
                 "references[0]", "exactly one");
    expect_error(body({{"references", {{{"audio", "not base64 at all!"}}}}}), "references[0].audio",
                 "base64 of an audio file");
    expect_error(body({{"references", {{{"audio", ""}}}}}), "references[0].audio", "base64");
    expect_error(body({{"references", {{{"audio", 7}}}}}), "references[0].audio", "");
    expect_error(body({{"references", {{{"text", 7}, {"audio", base64_encode(kAudio)}}}}}),
                 "references[0].text", "");
    expect_error(body({{"references", {{{"vq_codes", {{1, 2}, {3}}}}}}}), "references[0].vq_codes",
                 "equal length");
    expect_error(body({{"references", {{{"vq_codes", {{1, -2}}}}}}}), "references[0].vq_codes",
                 "integer in [0, 2^20]");
    expect_error(body({{"references", {{{"vq_codes", {{1.5}}}}}}}), "references[0].vq_codes",
                 "integer");
    expect_error(body({{"references", {{{"vq_codes", Json::array()}}}}}), "references[0].vq_codes",
                 "1 to 64 rows");
    expect_error(body({{"references", {{{"vq_codes", "1,2"}}}}}), "references[0].vq_codes", "");
    Json many = Json::array();
    for (int i = 0; i < 9; ++i) many.push_back({{"vq_codes", {{1}}}});
    expect_error(body({{"references", many}}), "references", "at most 8");
    expect_error(body({{"ref_audio", "%%%"}}), "ref_audio", "base64");
}

TEST(SpeechReferences, OversizeAudioIs413) {
    RequestLimits limits;
    limits.max_media_bytes = 16;
    const std::string big = base64_encode(std::vector<std::uint8_t>(64, 7));
    expect_error(body({{"references", {{{"audio", big}}}}}), "references[0].audio",
                 "bytes of media", 413, {}, limits);
}

}  // namespace
}  // namespace omnirt::serve::openai

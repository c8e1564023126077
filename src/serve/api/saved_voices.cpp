#include "serve/api/saved_voices.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "media/audio.h"
#include "text/utf8.h"

namespace omnirt::serve::api {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::string_view, 5> kAudioSuffixes{".wav", ".flac", ".mp3", ".ogg", ".opus"};
constexpr std::string_view kCodesSuffix = ".codes.json";
constexpr std::string_view kTextSuffix = ".txt";
constexpr std::size_t kListedVoices = 24;  // names an unknown-voice error lists at most

// The files found for one name.
struct VoiceFiles {
    std::vector<fs::path> audio;
    std::optional<fs::path> codes;
    std::optional<fs::path> text;
};

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// Reads a whole regular file of at most `max_bytes`.
Result<std::string> read_bounded(const fs::path& path, std::size_t max_bytes) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return fail(ErrorCode::not_found, path.string() + ": " + ec.message());
    if (size > max_bytes) {
        return fail(ErrorCode::invalid_argument, path.string() + ": " + std::to_string(size) +
                                                     " bytes, more than the " +
                                                     std::to_string(max_bytes) + " allowed");
    }
    std::ifstream file(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (!file.good() && !file.eof()) {
        return fail(ErrorCode::not_found, path.string() + ": cannot be read");
    }
    return bytes;
}

// The voice name and the kind of a file name; nullopt for a file that is not part of a voice.
std::optional<std::pair<std::string, std::string_view>> classify(const std::string& file) {
    if (file.starts_with('.')) return std::nullopt;
    auto ends = [&](std::string_view suffix) {
        return file.size() > suffix.size() && file.ends_with(suffix);
    };
    if (ends(kCodesSuffix)) {
        return std::pair{file.substr(0, file.size() - kCodesSuffix.size()), kCodesSuffix};
    }
    if (ends(kTextSuffix)) {
        return std::pair{file.substr(0, file.size() - kTextSuffix.size()), kTextSuffix};
    }
    for (std::string_view suffix : kAudioSuffixes) {
        if (ends(suffix)) return std::pair{file.substr(0, file.size() - suffix.size()), suffix};
    }
    return std::nullopt;
}

Result<openai::SpeechReference> load_voice(const std::string& name, const VoiceFiles& files,
                                           const openai::RequestLimits& limits) {
    const std::string who = "voice '" + name + "'";
    if (!files.text) {
        return fail(ErrorCode::invalid_argument,
                    who + ": " + name + ".txt (the transcript of its audio) is missing");
    }
    if (files.audio.size() + (files.codes ? 1 : 0) != 1) {
        return fail(ErrorCode::invalid_argument, who + ": needs exactly one audio file (" + name +
                                                     ".wav, .flac, .mp3, .ogg, " + ".opus) or " +
                                                     name + ".codes.json");
    }
    openai::SpeechReference reference;
    OMNI_TRY(reference.text, read_bounded(*files.text, limits.max_string_bytes));
    if (auto bad = text::find_invalid_utf8(reference.text); bad) {
        return fail(ErrorCode::invalid_argument,
                    files.text->string() + ": not UTF-8 (byte " + std::to_string(*bad) + ")");
    }
    if (files.codes) {
        OMNI_TRY(std::string bytes, read_bounded(*files.codes, limits.max_media_bytes));
        auto json = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
        auto codes = openai::parse_reference_codes(json, "vq_codes");
        if (!codes) {
            return fail(ErrorCode::invalid_argument,
                        files.codes->string() + ": " + codes.error().message);
        }
        reference.vq_codes = std::move(*codes);
        return reference;
    }
    const fs::path& path = files.audio.front();
    OMNI_TRY(std::string bytes, read_bounded(path, limits.max_media_bytes));
    const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
    if (auto decoded = media::decode_audio(std::span(data, bytes.size())); !decoded) {
        return fail(ErrorCode::invalid_argument,
                    path.string() + ": not audio this server decodes: " + decoded.error().message);
    }
    reference.audio =
        openai::MediaInput{.kind = openai::MediaKind::audio,
                           .source = openai::MediaSource::bytes,
                           .mime = "application/octet-stream",
                           .bytes = std::vector<std::uint8_t>(bytes.begin(), bytes.end())};
    return reference;
}

std::string known_voices(const std::vector<std::string>& presets, const SavedVoices* saved) {
    std::vector<std::string> names = presets;
    if (saved != nullptr) {
        for (std::string& name : saved->names()) names.push_back(std::move(name));
    }
    std::string known;
    for (std::size_t i = 0; i < names.size() && i < kListedVoices; ++i) {
        known += (known.empty() ? "" : ", ") + names[i];
    }
    if (names.size() > kListedVoices) {
        known += ", ... (" + std::to_string(names.size()) + " in all: GET /v1/audio/voices)";
    }
    return known;
}

}  // namespace

bool is_voice_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxVoiceNameLength) return false;
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (!alnum(name.front())) return false;
    return std::all_of(name.begin(), name.end(),
                       [&](char c) { return alnum(c) || c == '_' || c == '-'; });
}

Result<std::shared_ptr<const SavedVoices>> SavedVoices::load(const fs::path& directory,
                                                             const openai::RequestLimits& limits) {
    const std::string who = "--voices-dir " + directory.string();
    std::error_code ec;
    if (!fs::is_directory(directory, ec)) {
        return fail(ErrorCode::not_found, who + ": not a directory");
    }
    std::map<std::string, VoiceFiles> found;
    for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string file = it->path().filename().string();
        auto kind = classify(file);
        if (!kind) continue;
        auto& [name, suffix] = *kind;
        if (!is_voice_name(name)) {
            return fail(ErrorCode::invalid_argument,
                        who + ": " + file + ": a voice name is 1 to " +
                            std::to_string(kMaxVoiceNameLength) +
                            " lower-case letters, digits, '_' or '-', starting with a letter or "
                            "digit");
        }
        if (!it->is_regular_file(ec)) {
            return fail(ErrorCode::invalid_argument, who + ": " + file + " is not a regular file");
        }
        if (found.size() >= kMaxSavedVoices && !found.contains(name)) {
            return fail(ErrorCode::resource_exhausted,
                        who + ": more than " + std::to_string(kMaxSavedVoices) + " voices");
        }
        VoiceFiles& files = found[name];
        if (suffix == kTextSuffix) {
            files.text = it->path();
        } else if (suffix == kCodesSuffix) {
            files.codes = it->path();
        } else {
            files.audio.push_back(it->path());
        }
    }
    if (ec) return fail(ErrorCode::not_found, who + ": " + ec.message());
    auto voices = std::shared_ptr<SavedVoices>(new SavedVoices());
    for (const auto& [name, files] : found) {
        auto reference = load_voice(name, files, limits);
        if (!reference) return fail(reference.error().with_context(who));
        voices->voices_.emplace(name, std::move(*reference));
    }
    return std::shared_ptr<const SavedVoices>(std::move(voices));
}

const openai::SpeechReference* SavedVoices::find(std::string_view name) const {
    auto it = voices_.find(lower(name));
    return it == voices_.end() ? nullptr : &it->second;
}

std::vector<std::string> SavedVoices::names() const {
    std::vector<std::string> out;
    out.reserve(voices_.size());
    for (const auto& [name, reference] : voices_) out.push_back(name);
    return out;
}

openai::ProtocolResult<std::vector<openai::SpeechReference>> resolve_speech_voice(
    const std::string& voice, std::vector<openai::SpeechReference> references,
    const std::vector<std::string>& presets, const SavedVoices* saved) {
    const bool knows_voices = !presets.empty() || (saved != nullptr && saved->size() > 0);
    if (voice.empty() || !knows_voices) return references;
    const std::string name = lower(voice);
    if (std::find(presets.begin(), presets.end(), name) != presets.end()) return references;
    if (saved != nullptr && saved->size() > 0 && !is_voice_name(name)) {
        return openai::invalid_request(
            "voice", "'voice' must be 1 to " + std::to_string(kMaxVoiceNameLength) +
                         " letters, digits, '_' or '-' (GET /v1/audio/voices lists the voices)");
    }
    const openai::SpeechReference* reference = saved == nullptr ? nullptr : saved->find(name);
    if (reference == nullptr) {
        return openai::invalid_request("voice", "unknown voice '" + voice + "' (this server has: " +
                                                    known_voices(presets, saved) + ")");
    }
    if (!references.empty()) {
        return openai::invalid_request(
            "voice",
            "'voice' names a saved reference voice; it and 'references' (or "
            "'ref_audio') exclude each other");
    }
    return std::vector<openai::SpeechReference>{*reference};
}

}  // namespace omnirt::serve::api

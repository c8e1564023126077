#pragma once
// Saved voices for `/v1/audio/speech` (`omnirt serve --voices-dir DIR`): a speech request's
// `voice` names a reference clip kept on the server, and becomes that request's `references`
// (voice cloning, e.g. Fish Audio S2-Pro; docs/serve_openai.md "Saved voices").
//
// Directory layout (flat; read once, at load):
//   <name>.<wav|flac|mp3|ogg|opus>   the reference audio (any file libsndfile decodes), or
//   <name>.codes.json                its codec codes: [[c_0 ...], [c_1 ...], ...] (codebook rows)
//   <name>.txt                       what the audio says (UTF-8; required, may be empty)
// A name is 1 to kMaxVoiceNameLength lower-case letters, digits, '_' and '-', starting with a
// letter or digit. Other files (a README, hidden files) are ignored. A voice with two audio
// files, audio and codes, no transcript, a transcript without audio, an undecodable or oversized
// file, or a file name that looks like a voice but breaks the name rule fails the load, naming
// the file: a server never starts with a voice it would answer with an error.
//
// Thread safety: load() may run on any thread; a loaded SavedVoices is immutable and shared as
// shared_ptr<const>, read from any thread.
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"
#include "serve/openai/speech_references.h"

namespace omnirt::serve::api {

inline constexpr std::size_t kMaxVoiceNameLength = 64;
inline constexpr std::size_t kMaxSavedVoices = 1024;

// Whether `name` follows the name rule above (already lower-cased).
[[nodiscard]] bool is_voice_name(std::string_view name);

class SavedVoices {
  public:
    // Reads every voice of `directory`. Audio files are bounded by limits.max_media_bytes and
    // must decode; transcripts by limits.max_string_bytes and must be UTF-8; codes follow
    // speech_references.h's rules. invalid_argument / not_found naming the file otherwise;
    // resource_exhausted past kMaxSavedVoices voices.
    [[nodiscard]] static Result<std::shared_ptr<const SavedVoices>> load(
        const std::filesystem::path& directory, const openai::RequestLimits& limits);

    // The reference of a voice (name compared lower-cased); null when there is none.
    [[nodiscard]] const openai::SpeechReference* find(std::string_view name) const;
    // Sorted.
    [[nodiscard]] std::vector<std::string> names() const;
    [[nodiscard]] std::size_t size() const { return voices_.size(); }

  private:
    std::map<std::string, openai::SpeechReference, std::less<>> voices_;
};

// Resolves a speech request's `voice` against the server's voices: a saved voice becomes the
// request's only reference (a 400 on `voice` when the request brings `references` too); a
// preset voice (`presets`, the model family's speakers, lower-case) stays for the pipeline.
// When the server knows any voice, an unknown one is a 400 on `voice` naming the known ones,
// and a name that breaks the name rule (with saved voices) a 400 on `voice` too. With no known
// voices any `voice` goes to the pipeline unchanged. `saved` may be null.
[[nodiscard]] openai::ProtocolResult<std::vector<openai::SpeechReference>> resolve_speech_voice(
    const std::string& voice, std::vector<openai::SpeechReference> references,
    const std::vector<std::string>& presets, const SavedVoices* saved);

}  // namespace omnirt::serve::api

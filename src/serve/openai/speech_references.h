#pragma once
// Reference voices of a speech request (voice cloning, e.g. Fish Audio S2-Pro;
// docs/serve_openai.md): `references`, a list of {text, audio | vq_codes}, or the legacy pair
// `ref_audio` / `ref_text` (one reference). `audio` is a data: URL, plain base64 of an audio file,
// a path inside the server's allowed media directory, or an http(s) URL where the server allows
// remote media (media.h's rules; the pipeline's preprocessing fetches it); `vq_codes` the codec
// codes of the reference, a list of codebook rows of equal length. Every error is a 400 naming
// the field (references[i].audio ...); payloads over RequestLimits::max_media_bytes are 413.
//
// Thread safety: pure apart from media.h's file-system checks of local paths.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"
#include "serve/openai/limits.h"
#include "serve/openai/media.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::openai {

inline constexpr std::size_t kMaxSpeechReferences = 8;
inline constexpr std::size_t kMaxReferenceCodebooks = 64;
inline constexpr std::size_t kMaxReferenceFrames = 65536;

struct SpeechReference {
    std::string text;
    std::optional<MediaInput> audio;
    std::vector<std::vector<std::int64_t>> vq_codes;  // empty: none
    friend bool operator==(const SpeechReference&, const SpeechReference&) = default;
};

// Codec codes of a reference: a JSON list of 1..kMaxReferenceCodebooks codebook rows of equal
// length (at most kMaxReferenceFrames), each code an integer in [0, 2^20]. A 400 naming `param`.
[[nodiscard]] ProtocolResult<std::vector<std::vector<std::int64_t>>> parse_reference_codes(
    const nlohmann::json& codes, const std::string& param);

[[nodiscard]] ProtocolResult<std::vector<SpeechReference>> parse_speech_references(
    const nlohmann::json& body, const RequestLimits& limits, const MediaPolicy& media);

// inputs.references: [{"text", "audio": bytes} | {"text", "audio_path"} | {"text", "audio_url"}
// | {"text", "vq_codes": [[int...]...]}, ...]
[[nodiscard]] Value references_to_value(const std::vector<SpeechReference>& references);

}  // namespace omnirt::serve::openai

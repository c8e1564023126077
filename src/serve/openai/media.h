#pragma once
// Media references in chat content parts (image_url.url, video_url.url, input_audio.data).
//
// Accepted forms of a URL:
//   data:<mime>[;param=value...];base64,<payload>  -> bytes, strictly base64-decoded; the mime's
//                                                     top-level type must match the part kind
//                                                     (image/*, audio/*, video/*)
//   file:///abs/path, /abs/path, relative/path      -> path, only when MediaPolicy names an
//                                                     allowed directory; the path (relative ones
//                                                     against that directory) must resolve via
//                                                     realpath to a regular file inside it; '..'
//                                                     components are refused outright
//   http://..., https://...                         -> remote_url when MediaPolicy::allow_remote,
//                                                     else a 400 (nothing is fetched here)
// Anything else is a 400 naming `param`. A payload larger than RequestLimits::max_media_bytes
// is a 413.
//
// Thread safety: pure apart from reading the file system (realpath, stat) for local paths.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "serve/openai/limits.h"
#include "serve/openai/protocol_error.h"

namespace omnirt::serve::openai {

enum class MediaKind : std::uint8_t { image, audio, video };
enum class MediaSource : std::uint8_t { bytes, path, remote_url };
[[nodiscard]] std::string_view to_string(MediaKind kind);
[[nodiscard]] std::string_view to_string(MediaSource source);

struct MediaInput {
    MediaKind kind = MediaKind::image;
    MediaSource source = MediaSource::bytes;
    std::string mime;                 // e.g. "image/png"; from the data URL or the file extension
    std::vector<std::uint8_t> bytes;  // source == bytes
    std::string path;                 // source == path: the resolved absolute path
    std::string url;                  // source == remote_url
    friend bool operator==(const MediaInput&, const MediaInput&) = default;
};

[[nodiscard]] ProtocolResult<MediaInput> resolve_media_url(std::string_view url, MediaKind kind,
                                                           const MediaPolicy& policy,
                                                           const RequestLimits& limits,
                                                           const std::string& param);

// input_audio {data (base64, no data: prefix), format}: format is one of wav, mp3, flac, ogg,
// opus, pcm16 (mime audio/wav, audio/mpeg, audio/flac, audio/ogg, audio/ogg, audio/pcm).
// `param` names the input_audio object; errors name its data / format fields.
[[nodiscard]] ProtocolResult<MediaInput> decode_input_audio(std::string_view data,
                                                            std::string_view format,
                                                            const RequestLimits& limits,
                                                            const std::string& param);

}  // namespace omnirt::serve::openai

#include "serve/openai/media.h"

#include <sys/stat.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <memory>
#include <utility>

#include "serve/openai/base64.h"
#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

std::string lower(std::string_view text) {
    std::string out(text);
    for (auto& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

bool starts_with_ci(std::string_view text, std::string_view prefix) {
    return text.size() >= prefix.size() && lower(text.substr(0, prefix.size())) == prefix;
}

unexpected<ProtocolError> too_large(const std::string& param, std::size_t limit) {
    return unexpected<ProtocolError>(ProtocolError{
        413, "'" + param + "' holds more than " + std::to_string(limit) + " bytes of media",
        "invalid_request_error", param, "media_too_large"});
}

ProtocolResult<std::vector<std::uint8_t>> decode_payload(std::string_view payload,
                                                         const RequestLimits& limits,
                                                         const std::string& param) {
    if (base64_decoded_size_bound(payload.size()) > limits.max_media_bytes + 2) {
        return too_large(param, limits.max_media_bytes);
    }
    auto bytes = base64_decode(payload);
    if (!bytes.has_value()) {
        return invalid_request(param, "'" + param + "': " + bytes.error().message);
    }
    if (bytes->size() > limits.max_media_bytes) return too_large(param, limits.max_media_bytes);
    if (bytes->empty()) return invalid_request(param, "'" + param + "' holds no media bytes");
    return std::move(*bytes);
}

bool valid_mime(std::string_view mime) {
    const auto slash = mime.find('/');
    if (slash == 0 || slash == std::string_view::npos || slash + 1 == mime.size()) return false;
    for (const char c : mime) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' || c == '-' ||
                        c == '+' || c == '.' || c == '_';
        if (!ok) return false;
    }
    return mime.find('/', slash + 1) == std::string_view::npos;
}

ProtocolResult<MediaInput> decode_data_url(std::string_view url, MediaKind kind,
                                           const RequestLimits& limits, const std::string& param) {
    const auto comma = url.find(',');
    if (comma == std::string_view::npos) {
        return invalid_request(param, "'" + param + "' is a data URL without a ',' separator");
    }
    const std::string header = lower(url.substr(5, comma - 5));  // after "data:"
    const std::string_view payload = url.substr(comma + 1);
    constexpr std::string_view kBase64 = ";base64";
    if (header.size() < kBase64.size() ||
        header.compare(header.size() - kBase64.size(), kBase64.size(), kBase64) != 0) {
        return invalid_request(param, "'" + param + "': only base64 data URLs are supported");
    }
    std::string mime = header.substr(0, header.find(';'));
    if (!valid_mime(mime)) {
        return invalid_request(param, "'" + param + "' is a data URL without a valid media type");
    }
    const std::string expected = std::string(to_string(kind)) + "/";
    if (mime.compare(0, expected.size(), expected) != 0) {
        return invalid_request(
            param, "'" + param + "' has media type " + mime + ", expected " + expected + "*");
    }
    OMNI_TRY_P(auto bytes, decode_payload(payload, limits, param));
    MediaInput input;
    input.kind = kind;
    input.source = MediaSource::bytes;
    input.mime = std::move(mime);
    input.bytes = std::move(bytes);
    return input;
}

std::string mime_from_extension(std::string_view path, MediaKind kind) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 17> kTypes{{
        {"png", "image/png"},
        {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},
        {"webp", "image/webp"},
        {"bmp", "image/bmp"},
        {"wav", "audio/wav"},
        {"mp3", "audio/mpeg"},
        {"flac", "audio/flac"},
        {"ogg", "audio/ogg"},
        {"opus", "audio/ogg"},
        {"pcm", "audio/pcm"},
        {"mp4", "video/mp4"},
        {"webm", "video/webm"},
        {"mkv", "video/x-matroska"},
        {"mov", "video/quicktime"},
        {"avi", "video/x-msvideo"},
    }};
    const auto slash = path.rfind('/');
    const auto dot = path.rfind('.');
    if (dot != std::string_view::npos && (slash == std::string_view::npos || dot > slash)) {
        const std::string extension = lower(path.substr(dot + 1));
        for (const auto& [ext, mime] : kTypes) {
            if (ext == extension && mime.substr(0, mime.find('/')) == to_string(kind)) {
                return std::string(mime);
            }
        }
    }
    return "application/octet-stream";
}

ProtocolResult<std::string> percent_decode(std::string_view text, const std::string& param) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out.push_back(text[i]);
            continue;
        }
        auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        if (i + 2 >= text.size()) {
            return invalid_request(param, "'" + param + "' has a truncated %-escape");
        }
        const int high = hex(text[i + 1]);
        const int low = hex(text[i + 2]);
        if (high < 0 || low < 0) {
            return invalid_request(param, "'" + param + "' has an invalid %-escape");
        }
        out.push_back(static_cast<char>(high * 16 + low));
        i += 2;
    }
    return out;
}

std::string real_path(const std::string& path) {
    std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr),
                                                         &std::free);
    return resolved ? std::string(resolved.get()) : std::string();
}

ProtocolResult<MediaInput> resolve_local(std::string path, MediaKind kind,
                                         const MediaPolicy& policy, const std::string& param) {
    if (policy.allowed_local_dir.empty()) {
        return invalid_request(param, "'" + param +
                                          "': local media paths are disabled on this server; "
                                          "send a data: URL");
    }
    if (path.empty() || path.find('\0') != std::string::npos) {
        return invalid_request(param, "'" + param + "' is not a valid path");
    }
    // Refuse '..' components before touching the file system.
    for (std::size_t start = 0; start <= path.size();) {
        auto end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        if (path.compare(start, end - start, "..") == 0 && end - start == 2) {
            return invalid_request(param, "'" + param + "' may not contain '..'");
        }
        start = end + 1;
    }
    const std::string root = real_path(policy.allowed_local_dir);
    if (root.empty()) {
        return unexpected<ProtocolError>(ProtocolError{
            500, "the server's media directory is missing", "server_error", param, {}});
    }
    if (path.front() != '/') path = root + "/" + path;
    const std::string resolved = real_path(path);
    const std::string prefix = root == "/" ? root : root + "/";
    struct stat info {};
    if (resolved.empty() || resolved.compare(0, prefix.size(), prefix) != 0 ||
        ::stat(resolved.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
        // One message for "missing" and "outside": do not reveal what exists outside the dir.
        return invalid_request(param, "'" + param +
                                          "' does not name a readable file in the server's "
                                          "media directory");
    }
    MediaInput input;
    input.kind = kind;
    input.source = MediaSource::path;
    input.mime = mime_from_extension(resolved, kind);
    input.path = resolved;
    return input;
}

}  // namespace

std::string_view to_string(MediaKind kind) {
    switch (kind) {
        case MediaKind::image:
            return "image";
        case MediaKind::audio:
            return "audio";
        case MediaKind::video:
            return "video";
    }
    return "unknown";
}

std::string_view to_string(MediaSource source) {
    switch (source) {
        case MediaSource::bytes:
            return "bytes";
        case MediaSource::path:
            return "path";
        case MediaSource::remote_url:
            return "remote_url";
    }
    return "unknown";
}

ProtocolResult<MediaInput> resolve_media_url(std::string_view url, MediaKind kind,
                                             const MediaPolicy& policy, const RequestLimits& limits,
                                             const std::string& param) {
    if (url.empty()) return invalid_request(param, "'" + param + "' is empty");
    if (starts_with_ci(url, "data:")) return decode_data_url(url, kind, limits, param);
    if (starts_with_ci(url, "http://") || starts_with_ci(url, "https://")) {
        if (!policy.allow_remote) {
            return invalid_request(param, "'" + param +
                                              "': remote media URLs are disabled on this "
                                              "server; send a data: URL");
        }
        if (url.size() > limits.max_string_bytes) {
            return invalid_request(param, "'" + param + "' is too long");
        }
        MediaInput input;
        input.kind = kind;
        input.source = MediaSource::remote_url;
        input.url = std::string(url);
        return input;
    }
    if (starts_with_ci(url, "file://")) {
        const std::string_view rest = url.substr(7);
        if (rest.empty() || rest.front() != '/') {
            return invalid_request(param, "'" + param + "': a file URL must be file:///abs/path");
        }
        OMNI_TRY_P(std::string path, percent_decode(rest, param));
        return resolve_local(std::move(path), kind, policy, param);
    }
    const auto colon = url.find(':');
    const auto slash = url.find('/');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon < slash)) {
        return invalid_request(param, "'" + param + "' has an unsupported URL scheme");
    }
    return resolve_local(std::string(url), kind, policy, param);
}

ProtocolResult<MediaInput> decode_input_audio(std::string_view data, std::string_view format,
                                              const RequestLimits& limits,
                                              const std::string& param) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kFormats{{
        {"wav", "audio/wav"},
        {"mp3", "audio/mpeg"},
        {"flac", "audio/flac"},
        {"ogg", "audio/ogg"},
        {"opus", "audio/ogg"},
        {"pcm16", "audio/pcm"},
    }};
    std::string mime;
    for (const auto& [name, type] : kFormats) {
        if (name == format) mime = std::string(type);
    }
    if (mime.empty()) {
        return invalid_request(field_path(param, "format"),
                               "'" + param +
                                   ".format' must be one of wav, mp3, flac, ogg, "
                                   "opus, pcm16");
    }
    OMNI_TRY_P(auto bytes, decode_payload(data, limits, param + ".data"));
    MediaInput input;
    input.kind = MediaKind::audio;
    input.source = MediaSource::bytes;
    input.mime = std::move(mime);
    input.bytes = std::move(bytes);
    return input;
}

}  // namespace omnirt::serve::openai

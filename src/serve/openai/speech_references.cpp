#include "serve/openai/speech_references.h"

#include "serve/openai/base64.h"
#include "serve/openai/json_body.h"

namespace omnirt::serve::openai {
namespace {

// The longest string read as a relative path (PATH_MAX); base64 of an audio file is longer.
constexpr std::size_t kMaxRelativePath = 4096;

// data: URLs, http(s) and file:// URLs, absolute paths, and relative paths follow media.h's rules
// (a relative path is resolved inside --allowed-media-dir); anything else is plain base64 of an
// audio file. ("//" starts no path here: base64 of an MP3 frame does.) A relative path is a
// short string with a '.', which no base64 alphabet has (the extension of SGLang-Omni's
// `ref_audio` paths, e.g. its benchmark client's "seedtts/en/prompt-wavs/x.wav").
bool is_url_or_path(std::string_view text) {
    return text.starts_with("data:") || text.starts_with("http://") ||
           text.starts_with("https://") || text.starts_with("file://") ||
           (text.starts_with('/') && !text.starts_with("//")) ||
           (text.size() <= kMaxRelativePath && text.find('.') != std::string_view::npos);
}

ProtocolResult<MediaInput> reference_audio(const std::string& text, const RequestLimits& limits,
                                           const MediaPolicy& media, const std::string& param) {
    if (is_url_or_path(text))
        return resolve_media_url(text, MediaKind::audio, media, limits, param);
    if (base64_decoded_size_bound(text.size()) > limits.max_media_bytes + 2) {
        return unexpected(ProtocolError{413,
                                        "'" + param + "' holds more than " +
                                            std::to_string(limits.max_media_bytes) +
                                            " bytes of media",
                                        "invalid_request_error",
                                        param,
                                        {}});
    }
    auto bytes = base64_decode(text);
    if (!bytes || bytes->empty()) {
        return invalid_request(param, "'" + param +
                                          "' must be base64 of an audio file, a data: URL, a "
                                          "path or an http(s) URL");
    }
    return MediaInput{.kind = MediaKind::audio,
                      .source = MediaSource::bytes,
                      .mime = "application/octet-stream",
                      .bytes = std::move(*bytes)};
}

ProtocolResult<SpeechReference> parse_reference(const nlohmann::json& item,
                                                const RequestLimits& limits,
                                                const MediaPolicy& media,
                                                const std::string& param) {
    if (!item.is_object()) {
        return invalid_request(param, "'" + param + "' must be an object {text, audio | vq_codes}");
    }
    SpeechReference out;
    OMNI_TRY_P(auto text, read_string(item, "text", param, limits.max_string_bytes));
    if (text) out.text = std::move(*text);
    const std::size_t max_audio_chars = limits.max_media_bytes / 3 * 4 + 4096;
    OMNI_TRY_P(auto audio, read_string(item, "audio", param, max_audio_chars));
    const auto codes = item.find("vq_codes");
    const bool has_codes = codes != item.end() && !codes->is_null();
    if (audio.has_value() == has_codes) {
        return invalid_request(param,
                               "'" + param + "' needs exactly one of 'audio' and 'vq_codes'");
    }
    if (audio) {
        OMNI_TRY_P(out.audio, reference_audio(*audio, limits, media, field_path(param, "audio")));
    } else {
        OMNI_TRY_P(out.vq_codes, parse_reference_codes(*codes, field_path(param, "vq_codes")));
    }
    return out;
}

}  // namespace

ProtocolResult<std::vector<std::vector<std::int64_t>>> parse_reference_codes(
    const nlohmann::json& codes, const std::string& param) {
    const std::string shape = "'" + param + "' must be a list of codebook rows of equal length";
    if (!codes.is_array() || codes.empty() || codes.size() > kMaxReferenceCodebooks) {
        return invalid_request(
            param, shape + " (1 to " + std::to_string(kMaxReferenceCodebooks) + " rows)");
    }
    std::vector<std::vector<std::int64_t>> rows;
    for (std::size_t k = 0; k < codes.size(); ++k) {
        const nlohmann::json& row = codes[k];
        if (!row.is_array() || row.size() > kMaxReferenceFrames ||
            (k > 0 && row.size() != rows[0].size())) {
            return invalid_request(
                param, shape + " (at most " + std::to_string(kMaxReferenceFrames) + " frames)");
        }
        std::vector<std::int64_t> values;
        values.reserve(row.size());
        for (const nlohmann::json& code : row) {
            if (!code.is_number_integer() || code.get<std::int64_t>() < 0 ||
                code.get<std::int64_t>() > (std::int64_t{1} << 20)) {
                return invalid_request(param, "'" + param +
                                                  "' holds a code that is not an "
                                                  "integer in [0, 2^20]");
            }
            values.push_back(code.get<std::int64_t>());
        }
        rows.push_back(std::move(values));
    }
    return rows;
}

ProtocolResult<std::vector<SpeechReference>> parse_speech_references(const nlohmann::json& body,
                                                                     const RequestLimits& limits,
                                                                     const MediaPolicy& media) {
    std::vector<SpeechReference> out;
    const auto list = body.find("references");
    const bool has_list = list != body.end() && !list->is_null();
    const std::size_t max_audio_chars = limits.max_media_bytes / 3 * 4 + 4096;
    OMNI_TRY_P(auto ref_audio, read_string(body, "ref_audio", "", max_audio_chars));
    OMNI_TRY_P(auto ref_text, read_string(body, "ref_text", "", limits.max_string_bytes));
    if (has_list && (ref_audio || ref_text)) {
        return invalid_request("references",
                               "'references' and the legacy 'ref_audio' / 'ref_text' exclude each "
                               "other");
    }
    if (has_list) {
        if (!list->is_array() || list->size() > kMaxSpeechReferences) {
            return invalid_request("references", "'references' must be a list of at most " +
                                                     std::to_string(kMaxSpeechReferences) +
                                                     " objects {text, audio | vq_codes}");
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
            OMNI_TRY_P(auto reference,
                       parse_reference((*list)[i], limits, media, index_path("references", i)));
            out.push_back(std::move(reference));
        }
        return out;
    }
    if (ref_text && !ref_audio) {
        return invalid_request("ref_audio", "'ref_text' needs 'ref_audio'");
    }
    if (ref_audio) {
        SpeechReference reference;
        if (ref_text) reference.text = std::move(*ref_text);
        OMNI_TRY_P(reference.audio, reference_audio(*ref_audio, limits, media, "ref_audio"));
        out.push_back(std::move(reference));
    }
    return out;
}

Value references_to_value(const std::vector<SpeechReference>& references) {
    List out;
    for (const SpeechReference& reference : references) {
        Map item;
        item.emplace("text", Value(reference.text));
        if (reference.audio) {
            switch (reference.audio->source) {
                case MediaSource::bytes:
                    item.emplace("audio", Value(Bytes{reference.audio->bytes}));
                    break;
                case MediaSource::path:
                    item.emplace("audio_path", Value(reference.audio->path));
                    break;
                case MediaSource::remote_url:
                    item.emplace("audio_url", Value(reference.audio->url));
                    break;
            }
        } else {
            List rows;
            for (const auto& row : reference.vq_codes) {
                List codes;
                codes.reserve(row.size());
                for (const std::int64_t code : row) codes.emplace_back(code);
                rows.emplace_back(std::move(codes));
            }
            item.emplace("vq_codes", Value(std::move(rows)));
        }
        out.emplace_back(std::move(item));
    }
    return Value(std::move(out));
}

}  // namespace omnirt::serve::openai

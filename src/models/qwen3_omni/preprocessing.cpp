#include "models/qwen3_omni/preprocessing.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "media/audio.h"
#include "media/mel.h"
#include "models/qwen3/prompt.h"
#include "models/qwen3_omni/chat_layout.h"
#include "models/qwen3_omni/placeholders.h"
#include "models/qwen3_omni/rope_index.h"
#include "text/tokenizer.h"

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::string_view kWho = "qwen3_omni.preprocessing";

Error invalid(const std::string& message) {
    return Error{ErrorCode::invalid_argument, std::string(kWho) + ": " + message};
}

// One media part of the conversation, in prompt order.
struct MediaPart {
    const Value* part = nullptr;
    std::string where;  // "inputs.messages[0].content[1] (image)"
    text::ContentKind kind = text::ContentKind::image;
};

Result<std::vector<MediaPart>> media_parts(const Value& messages) {
    std::vector<MediaPart> out;
    for (std::size_t i = 0; i < messages.as_list().size(); ++i) {
        const Value* content = messages.as_list()[i].find("content");
        if (content == nullptr || !content->is_list()) continue;
        for (std::size_t k = 0; k < content->as_list().size(); ++k) {
            const Value& part = content->as_list()[k];
            const Value* type = part.find("type");
            if (type == nullptr || !type->is_string() || type->as_string() == "text") continue;
            const std::string& name = type->as_string();
            const text::ContentKind kind = name == "image"   ? text::ContentKind::image
                                           : name == "video" ? text::ContentKind::video
                                                             : text::ContentKind::audio;
            out.push_back({.part = &part,
                           .where = "inputs.messages[" + std::to_string(i) + "].content[" +
                                    std::to_string(k) + "] (" + name + ")",
                           .kind = kind});
        }
    }
    return out;
}

// The part's bytes: inline data, or a file the serve layer resolved inside its allowed directory.
Result<std::vector<std::byte>> part_bytes(const MediaPart& media,
                                          const PreprocessOptions& options) {
    const Value* source = media.part->find("source");
    const std::string kind = source != nullptr && source->is_string() ? source->as_string() : "";
    if (kind == "bytes") {
        const Value* data = media.part->find("data");
        if (data == nullptr || !data->is_bytes()) {
            return fail(invalid(media.where + ": 'data' must be bytes"));
        }
        const std::vector<std::uint8_t>& bytes = data->if_bytes()->data;
        std::vector<std::byte> out(bytes.size());
        if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
        return out;
    }
    if (kind == "path") {
        const Value* path = media.part->find("path");
        if (path == nullptr || !path->is_string()) {
            return fail(invalid(media.where + ": 'path' must be a string"));
        }
        std::error_code error;
        const auto size = std::filesystem::file_size(path->as_string(), error);
        if (error) return fail(invalid(media.where + ": cannot read the file: " + error.message()));
        if (static_cast<std::int64_t>(size) > options.max_media_bytes) {
            return fail(invalid(media.where + ": the file is larger than " +
                                std::to_string(options.max_media_bytes) + " bytes"));
        }
        std::vector<std::byte> out(size);
        std::ifstream file(path->as_string(), std::ios::binary);
        if (!file.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size))) {
            return fail(invalid(media.where + ": cannot read the file"));
        }
        return out;
    }
    if (kind == "remote_url") {
        const Value* url = media.part->find("url");
        if (url == nullptr || !url->is_string()) {
            return fail(invalid(media.where + ": 'url' must be a string"));
        }
        auto fetched = media::fetch_url(url->as_string(), options.fetch);
        if (!fetched) return fail(invalid(media.where + ": " + fetched.error().message));
        return std::move(*fetched);
    }
    return fail(invalid(media.where + ": unknown media source '" + kind + "'"));
}

// Any decoder error becomes a 400 naming the part.
Error media_error(const MediaPart& media, const Error& error) {
    return invalid(media.where + ": " + error.message);
}

Tensor mel_tensor(const media::LogMelSpectrogram& mel) {
    return Tensor::from_vector(mel.values, {mel.mel_bins, mel.frames});
}

Value image_item(std::uint64_t key, const media::VisionPatches& patches) {
    return Value(Map{{"key", Value(static_cast<std::int64_t>(key))},
                     {"pixel_values", Value(Tensor::from_vector(
                                          patches.pixels, {patches.rows, media::kVisionPatchDim}))},
                     {"grid_thw", Value(Tensor::from_vector(std::vector<std::int64_t>{
                                      patches.grid_t, patches.grid_h, patches.grid_w}))}});
}

Result<media::LogMelSpectrogram> audio_mel(std::span<const std::byte> bytes) {
    OMNI_TRY(media::AudioBuffer buffer, media::decode_audio(bytes));
    OMNI_TRY(std::vector<float> samples, media::to_whisper_input(buffer));
    return media::whisper_log_mel(samples);
}

// What each media part became, by kind (MediaItems' order) with its encoder input.
struct Prepared {
    MediaItems items;
    std::vector<Value> images;  // image_items entries of images, by image index
    std::vector<Value> videos;  // of videos, by video index
    std::vector<std::uint64_t> image_keys, video_keys, audio_keys, video_audio_keys;
    std::vector<Value> audios;        // audio_items entries of audios, by audio index
    std::vector<Value> video_audios;  // of video soundtracks, by video index (null without)
};

Status prepare(const MediaPart& media, const PreprocessOptions& options, Prepared& out) {
    OMNI_TRY(std::vector<std::byte> bytes, part_bytes(media, options));
    const std::span<const std::byte> view(bytes);
    switch (media.kind) {
        case text::ContentKind::image: {
            auto image = media::decode_image(view, options.image_limits);
            if (!image) return fail(media_error(media, image.error()));
            auto patches = media::preprocess_image(*image, options.image_bounds);
            if (!patches) return fail(media_error(media, patches.error()));
            const std::uint64_t key = content_key(bytes.data(), bytes.size(), 1);
            out.items.images.push_back({patches->grid_t, patches->grid_h, patches->grid_w});
            out.images.push_back(image_item(key, *patches));
            out.image_keys.push_back(key);
            return ok_status();
        }
        case text::ContentKind::video: {
            media::VideoOptions video = options.video;
            video.decode_audio = options.use_audio_in_video;
            auto input = media::preprocess_video(view, video);
            if (!input) return fail(media_error(media, input.error()));
            const std::uint64_t key = content_key(bytes.data(), bytes.size(), 2);
            VideoItem item{
                .grid = {input->patches.grid_t, input->patches.grid_h, input->patches.grid_w},
                .second_per_grid = input->second_per_grid};
            Value soundtrack;
            if (options.use_audio_in_video && input->has_audio && !input->audio_16k_mono.empty()) {
                auto mel = media::whisper_log_mel(input->audio_16k_mono);
                if (!mel) return fail(media_error(media, mel.error()));
                item.audio_mel_frames = mel->frames;
                soundtrack = Value(Map{{"key", Value(static_cast<std::int64_t>(key ^ 3))},
                                       {"mel", Value(mel_tensor(*mel))}});
            }
            out.items.videos.push_back(item);
            out.videos.push_back(image_item(key, input->patches));
            out.video_keys.push_back(key);
            out.video_audio_keys.push_back(key ^ 3);
            out.video_audios.push_back(std::move(soundtrack));
            return ok_status();
        }
        default: {
            auto mel = audio_mel(view);
            if (!mel) return fail(media_error(media, mel.error()));
            const std::uint64_t key = content_key(bytes.data(), bytes.size(), 4);
            out.items.audio_mel_frames.push_back(mel->frames);
            out.audios.push_back(Value(Map{{"key", Value(static_cast<std::int64_t>(key))},
                                           {"mel", Value(mel_tensor(*mel))}}));
            out.audio_keys.push_back(key);
            return ok_status();
        }
    }
}

std::int64_t pad_of(MediaKind kind, const LayoutConfig& layout) {
    switch (kind) {
        case MediaKind::image:
            return layout.image_token_id;
        case MediaKind::video:
            return layout.video_token_id;
        default:
            return layout.audio_token_id;
    }
}

Result<std::vector<std::int64_t>> prompt_ids(const OmniRequest& request,
                                             const text::Tokenizer& tokenizer,
                                             const PreprocessOptions& options,
                                             std::vector<MediaPart>& parts) {
    std::string text;
    if (const Value* messages = request.inputs.find("messages"); messages && !messages->is_null()) {
        auto chat = qwen3::parse_chat_messages(*messages, /*accept_media=*/true);
        if (!chat) return fail(invalid(chat.error().message));
        OMNI_TRY(parts, media_parts(*messages));
        auto rendered = format_omni_chat(*chat, options.add_generation_prompt);
        if (!rendered) return fail(invalid(rendered.error().message));
        text = std::move(rendered->text);
    } else if (const Value* prompt = request.inputs.find("prompt"); prompt && prompt->is_string()) {
        text = prompt->as_string();
    } else if (const Value* speech = request.inputs.find("text"); speech && speech->is_string()) {
        // POST /v1/audio/speech: text to read aloud, which a conversational model does not do.
        return fail(
            invalid("Qwen3-Omni answers conversations and does not read a text aloud: POST "
                    "/v1/audio/speech is not served by this model; send /v1/chat/completions with "
                    "modalities [\"text\", \"audio\"] for a spoken answer"));
    } else {
        return fail(invalid("the request needs inputs.messages or a string inputs.prompt"));
    }
    auto ids = tokenizer.encode(text);
    if (!ids) return fail(invalid(ids.error().message));
    if (ids->empty()) return fail(invalid("the prompt is empty"));
    return std::vector<std::int64_t>(ids->begin(), ids->end());
}

}  // namespace

std::uint64_t content_key(const void* bytes, std::size_t size, std::uint64_t seed) {
    std::uint64_t hash = 1469598103934665603ull ^ (seed * 1099511628211ull);
    const auto* p = static_cast<const unsigned char*>(bytes);
    for (std::size_t i = 0; i < size; ++i) {
        hash ^= p[i];
        hash *= 1099511628211ull;
    }
    return hash;
}

Result<Map> preprocess_request(const OmniRequest& request, const text::Tokenizer& tokenizer,
                               const PreprocessOptions& options) {
    std::vector<MediaPart> parts;
    OMNI_TRY(std::vector<std::int64_t> ids, prompt_ids(request, tokenizer, options, parts));
    if (parts.size() > options.max_media_items) {
        return fail(invalid("the request has " + std::to_string(parts.size()) +
                            " media parts; at most " + std::to_string(options.max_media_items) +
                            " are accepted"));
    }
    Prepared prepared;
    for (const MediaPart& part : parts) OMNI_RETURN_IF_ERROR(prepare(part, options, prepared));

    auto expanded = expand_placeholders(ids, prepared.items, options.layout);
    if (!expanded) return fail(invalid(expanded.error().message));
    auto rope = compute_rope_index(expanded->token_ids, prepared.items, options.layout);
    if (!rope) return fail(invalid(rope.error().message));

    const std::vector<std::int64_t>& tokens = expanded->token_ids;
    const auto n = static_cast<std::int64_t>(tokens.size());
    std::vector<std::int32_t> input_ids(tokens.begin(), tokens.end());
    // The engine takes integer positions: fractional temporal positions of a video (its
    // second_per_grid * 13 not whole) are rounded (docs/models/qwen3_omni.md).
    std::vector<std::int64_t> positions(static_cast<std::size_t>(3 * n));
    for (std::size_t axis = 0; axis < 3; ++axis) {
        for (std::int64_t row = 0; row < n; ++row) {
            positions[axis * static_cast<std::size_t>(n) + static_cast<std::size_t>(row)] =
                std::llround(rope->positions[axis][static_cast<std::size_t>(row)]);
        }
    }

    List media;
    List image_items;
    List audio_items;
    for (const MediaSpan& span : expanded->spans) {
        const std::int64_t pad = pad_of(span.kind, options.layout);
        std::vector<std::int64_t> rows;
        for (std::size_t row = span.begin; row < span.end; ++row) {
            if (tokens[row] == pad) rows.push_back(static_cast<std::int64_t>(row));
        }
        std::uint64_t key = 0;
        std::string kind;
        std::string encoder = "image_encoder";
        std::int64_t item = 0;
        switch (span.kind) {
            case MediaKind::image:
                key = prepared.image_keys[span.index];
                kind = "image";
                item = static_cast<std::int64_t>(image_items.size());
                image_items.push_back(prepared.images[span.index]);
                break;
            case MediaKind::video:
                key = prepared.video_keys[span.index];
                kind = "video";
                item = static_cast<std::int64_t>(image_items.size());
                image_items.push_back(prepared.videos[span.index]);
                break;
            case MediaKind::audio:
                key = prepared.audio_keys[span.index];
                kind = "audio";
                encoder = "audio_encoder";
                item = static_cast<std::int64_t>(audio_items.size());
                audio_items.push_back(prepared.audios[span.index]);
                break;
            case MediaKind::video_audio:
                key = prepared.video_audio_keys[span.index];
                kind = "audio";
                encoder = "audio_encoder";
                item = static_cast<std::int64_t>(audio_items.size());
                audio_items.push_back(prepared.video_audios[span.index]);
                break;
        }
        media.push_back(Value(Map{{"kind", Value(kind)},
                                  {"key", Value(static_cast<std::int64_t>(key))},
                                  {"rows", Value(Tensor::from_vector(rows))},
                                  {"encoder", Value(encoder)},
                                  {"item", Value(item)}}));
    }
    Map data;
    data.emplace("input_ids", Value(Tensor::from_vector(input_ids)));
    data.emplace("positions", Value(Tensor::from_vector(positions, {3, n})));
    data.emplace("rope_delta", Value(static_cast<std::int64_t>(std::llround(rope->rope_delta))));
    data.emplace("media", Value(std::move(media)));
    data.emplace("image_items", Value(std::move(image_items)));
    data.emplace("audio_items", Value(std::move(audio_items)));
    return data;
}

}  // namespace omnirt::models::qwen3_omni

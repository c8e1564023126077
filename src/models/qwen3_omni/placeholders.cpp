#include "models/qwen3_omni/placeholders.h"

#include <string>

namespace omnirt::models::qwen3_omni {
namespace {

std::string row(std::size_t index) { return "prompt_ids[" + std::to_string(index) + "]"; }

Status check_count(std::size_t pads, std::size_t items, std::string_view pad_name,
                   std::string_view items_name) {
    if (pads == items) return ok_status();
    return fail(ErrorCode::invalid_argument, "the prompt has " + std::to_string(pads) + " " +
                                                 std::string(pad_name) + " placeholder(s) but " +
                                                 std::to_string(items) + " " +
                                                 std::string(items_name) + " were given");
}

// The pad at `index` must sit alone between `open` and `close`.
Status check_triplet(std::span<const std::int64_t> ids, std::size_t index, std::int64_t open,
                     std::int64_t close, std::string_view triplet) {
    if (index > 0 && ids[index - 1] == open && index + 1 < ids.size() && ids[index + 1] == close) {
        return ok_status();
    }
    return fail(
        ErrorCode::invalid_argument,
        row(index) + ": a media pad must stand alone in its triplet " + std::string(triplet));
}

// The expanded pads of one item (validated token counts, computed up front).
struct ItemTokens {
    std::int64_t pads = 0;
    std::int64_t audio_pads = 0;  // a video's soundtrack; 0 without one
};

void append_repeated(std::vector<std::int64_t>& out, std::int64_t count, std::int64_t id) {
    out.insert(out.end(), static_cast<std::size_t>(count), id);
}

// Video and soundtrack pads in time order (the processor's rule, compared in double).
void append_interleaved(const VideoItem& video, const ItemTokens& tokens,
                        const LayoutConfig& config, std::vector<std::int64_t>& out) {
    const std::int64_t merge = config.spatial_merge_size;
    const std::int64_t per_group = (video.grid.h / merge) * (video.grid.w / merge);
    std::int64_t video_index = 0;
    std::int64_t audio_index = 0;
    while (video_index < tokens.pads && audio_index < tokens.audio_pads) {
        const double video_time = static_cast<double>(video_index / per_group) *
                                  video.second_per_grid * config.position_id_per_seconds;
        if (video_time <= static_cast<double>(audio_index)) {
            out.push_back(config.video_token_id);
            ++video_index;
        } else {
            out.push_back(config.audio_token_id);
            ++audio_index;
        }
    }
    append_repeated(out, tokens.pads - video_index, config.video_token_id);
    append_repeated(out, tokens.audio_pads - audio_index, config.audio_token_id);
}

}  // namespace

std::string_view to_string(MediaKind kind) {
    switch (kind) {
        case MediaKind::image:
            return "image";
        case MediaKind::video:
            return "video";
        case MediaKind::audio:
            return "audio";
        case MediaKind::video_audio:
            return "video_audio";
    }
    return "image";
}

Result<ExpandedPrompt> expand_placeholders(std::span<const std::int64_t> prompt_ids,
                                           const MediaItems& media, const LayoutConfig& config) {
    OMNI_RETURN_IF_ERROR(validate(config));
    std::size_t image_pads = 0;
    std::size_t video_pads = 0;
    std::size_t audio_pads = 0;
    for (const std::int64_t id : prompt_ids) {
        image_pads += id == config.image_token_id ? 1 : 0;
        video_pads += id == config.video_token_id ? 1 : 0;
        audio_pads += id == config.audio_token_id ? 1 : 0;
    }
    OMNI_RETURN_IF_ERROR(check_count(image_pads, media.images.size(), "<|image_pad|>", "images"));
    OMNI_RETURN_IF_ERROR(check_count(video_pads, media.videos.size(), "<|video_pad|>", "videos"));
    OMNI_RETURN_IF_ERROR(
        check_count(audio_pads, media.audio_mel_frames.size(), "<|audio_pad|>", "audios"));

    // Token counts first, so that the length is checked before anything is allocated.
    std::int64_t length = static_cast<std::int64_t>(prompt_ids.size());
    std::vector<ItemTokens> images(media.images.size());
    std::vector<ItemTokens> videos(media.videos.size());
    std::vector<ItemTokens> audios(media.audio_mel_frames.size());
    for (std::size_t i = 0; i < images.size(); ++i) {
        OMNI_TRY(images[i].pads,
                 vision_token_count(media.images[i], config, "images[" + std::to_string(i) + "]"));
        length += images[i].pads - 1;
    }
    for (std::size_t i = 0; i < videos.size(); ++i) {
        const std::string what = "videos[" + std::to_string(i) + "]";
        const VideoItem& video = media.videos[i];
        OMNI_RETURN_IF_ERROR(validate(video, config, what));
        OMNI_TRY(videos[i].pads, vision_token_count(video.grid, config, what));
        if (video.audio_mel_frames.has_value()) {
            OMNI_TRY(videos[i].audio_pads, audio_token_count(*video.audio_mel_frames, what));
            length += videos[i].audio_pads + 2;  // + <|audio_start|> <|audio_end|>
        }
        length += videos[i].pads - 1;
    }
    for (std::size_t i = 0; i < audios.size(); ++i) {
        OMNI_TRY(audios[i].pads,
                 audio_token_count(media.audio_mel_frames[i], "audios[" + std::to_string(i) + "]"));
        length += audios[i].pads - 1;
    }
    if (length > kMaxPromptTokens) {
        return fail(ErrorCode::out_of_range,
                    "the expanded prompt would have " + std::to_string(length) +
                        " tokens, more than the limit of " + std::to_string(kMaxPromptTokens));
    }

    ExpandedPrompt out;
    out.token_ids.reserve(static_cast<std::size_t>(length));
    std::size_t image_index = 0;
    std::size_t video_index = 0;
    std::size_t audio_index = 0;
    for (std::size_t i = 0; i < prompt_ids.size(); ++i) {
        const std::int64_t id = prompt_ids[i];
        const std::size_t begin = out.token_ids.size();
        if (id == config.image_token_id) {
            OMNI_RETURN_IF_ERROR(check_triplet(prompt_ids, i, config.vision_start_token_id,
                                               config.vision_end_token_id,
                                               "<|vision_start|><|image_pad|><|vision_end|>"));
            const std::int64_t pads = images[image_index].pads;
            append_repeated(out.token_ids, pads, config.image_token_id);
            out.spans.push_back({MediaKind::image, image_index, begin, out.token_ids.size(), pads});
            ++image_index;
        } else if (id == config.video_token_id) {
            OMNI_RETURN_IF_ERROR(check_triplet(prompt_ids, i, config.vision_start_token_id,
                                               config.vision_end_token_id,
                                               "<|vision_start|><|video_pad|><|vision_end|>"));
            const ItemTokens& tokens = videos[video_index];
            if (tokens.audio_pads == 0) {
                append_repeated(out.token_ids, tokens.pads, config.video_token_id);
                out.spans.push_back(
                    {MediaKind::video, video_index, begin, out.token_ids.size(), tokens.pads});
            } else {
                // <|vision_start|> is already out; <|vision_end|> follows as the next prompt id.
                out.token_ids.push_back(config.audio_start_token_id);
                const std::size_t body = out.token_ids.size();
                append_interleaved(media.videos[video_index], tokens, config, out.token_ids);
                const std::size_t body_end = out.token_ids.size();
                out.token_ids.push_back(config.audio_end_token_id);
                out.spans.push_back({MediaKind::video, video_index, body, body_end, tokens.pads});
                out.spans.push_back(
                    {MediaKind::video_audio, video_index, body, body_end, tokens.audio_pads});
            }
            ++video_index;
        } else if (id == config.audio_token_id) {
            OMNI_RETURN_IF_ERROR(check_triplet(prompt_ids, i, config.audio_start_token_id,
                                               config.audio_end_token_id,
                                               "<|audio_start|><|audio_pad|><|audio_end|>"));
            const std::int64_t pads = audios[audio_index].pads;
            append_repeated(out.token_ids, pads, config.audio_token_id);
            out.spans.push_back({MediaKind::audio, audio_index, begin, out.token_ids.size(), pads});
            ++audio_index;
        } else {
            out.token_ids.push_back(id);
        }
    }
    OMNI_CHECK(static_cast<std::int64_t>(out.token_ids.size()) == length,
               "expand_placeholders: the expanded length differs from the one computed up front");
    return out;
}

}  // namespace omnirt::models::qwen3_omni

// Mirrors transformers' Qwen3-Omni get_rope_index group by group: every group of positions
// (text run, bos, body, eos) is `start + offset` in float32 with `start` derived as transformers
// derives it, so that fractional video positions round exactly as its tensors do.
#include "models/qwen3_omni/rope_index.h"

#include <algorithm>
#include <string>

namespace omnirt::models::qwen3_omni {
namespace {

constexpr float kMaxPosition = static_cast<float>(kMaxPromptTokens);

std::string row(std::size_t index) { return "token_ids[" + std::to_string(index) + "]"; }

class RopeBuilder {
  public:
    RopeBuilder(std::span<const std::int64_t> ids, const MediaItems& media,
                const LayoutConfig& config)
        : ids_(ids), media_(media), config_(config) {
        for (auto& axis : out_.positions) axis.reserve(ids.size());
    }

    Result<RopeIndex> build() {
        std::size_t text_begin = 0;
        std::size_t i = 0;
        while (i < ids_.size()) {
            const std::int64_t id = ids_[i];
            if (id == config_.vision_start_token_id || id == config_.audio_start_token_id) {
                // One iteration of transformers' loop: the text before the span, then the span.
                float start = next_;
                const auto text_length = static_cast<std::int64_t>(i - text_begin);
                if (text_length > 0) {
                    append_run(start, text_length);
                    start = start + static_cast<float>(text_length);
                }
                OMNI_TRY(i, append_span(i, start));
                text_begin = i;
            } else if (is_span_only(id)) {
                return fail(ErrorCode::invalid_argument,
                            row(i) + ": token " + std::to_string(id) +
                                " (a media pad or end marker) outside a media span");
            } else {
                ++i;
            }
        }
        if (text_begin < ids_.size()) {
            append_run(next_, static_cast<std::int64_t>(ids_.size() - text_begin));
        }
        OMNI_RETURN_IF_ERROR(check_all_used());
        if (max_position_ >= kMaxPosition) {
            return fail(ErrorCode::out_of_range,
                        "the prompt's positions reach " + std::to_string(max_position_) +
                            ", beyond the limit of 2^24 (float32 positions)");
        }
        const auto rows = static_cast<float>(ids_.size());
        out_.rope_delta = (ids_.empty() ? 0.0f : max_position_ + 1.0f) - rows;
        return std::move(out_);
    }

  private:
    bool is_span_only(std::int64_t id) const {
        return id == config_.image_token_id || id == config_.video_token_id ||
               id == config_.audio_token_id || id == config_.vision_end_token_id ||
               id == config_.audio_end_token_id;
    }

    void push(float t, float h, float w) {
        out_.positions[0].push_back(t);
        out_.positions[1].push_back(h);
        out_.positions[2].push_back(w);
        max_position_ = std::max({max_position_, t, h, w});
    }

    // `length` positions start + j on every axis; returns the last (the group's max).
    float append_run(float start, std::int64_t length) {
        float last = start;
        for (std::int64_t j = 0; j < length; ++j) {
            last = static_cast<float>(j) + start;
            push(last, last, last);
        }
        return last;
    }

    // Requires ids_[index] == expected; `what` names the expected token.
    Status expect(std::size_t index, std::int64_t expected, std::string_view what) const {
        if (index < ids_.size() && ids_[index] == expected) return ok_status();
        return fail(ErrorCode::invalid_argument,
                    (index < ids_.size() ? row(index) : std::string("end of prompt")) +
                        ": expected " + std::string(what) + " to close the media span");
    }

    // The body of an image or video (no soundtrack): pads at [index, index + count).
    Status check_pads(std::size_t index, std::int64_t count, std::int64_t pad,
                      std::string_view what) const {
        for (std::int64_t k = 0; k < count; ++k) {
            const std::size_t at = index + static_cast<std::size_t>(k);
            if (at >= ids_.size() || ids_[at] != pad) {
                return fail(ErrorCode::invalid_argument,
                            (at < ids_.size() ? row(at) : std::string("end of prompt")) + ": " +
                                std::string(what) + " expects " + std::to_string(count) +
                                " pads, found " + std::to_string(k));
            }
        }
        return ok_status();
    }

    // Vision positions of one item at `start`: merged tokens in raster order per temporal
    // group, T = (g · seconds_per_grid) · pps (float32, in transformers' order of operations).
    struct VisionPositions {
        std::vector<float> t, h, w;
    };
    VisionPositions vision_positions(const GridThw& grid, float seconds_per_grid,
                                     float start) const {
        const std::int64_t merge = config_.spatial_merge_size;
        const std::int64_t rows = grid.h / merge;
        const std::int64_t cols = grid.w / merge;
        const auto pps = static_cast<float>(config_.position_id_per_seconds);
        VisionPositions out;
        const auto count = static_cast<std::size_t>(grid.t * rows * cols);
        out.t.reserve(count);
        out.h.reserve(count);
        out.w.reserve(count);
        for (std::int64_t g = 0; g < grid.t; ++g) {
            const float time = (static_cast<float>(g) * seconds_per_grid) * pps;
            for (std::int64_t r = 0; r < rows; ++r) {
                for (std::int64_t c = 0; c < cols; ++c) {
                    out.t.push_back(time + start);
                    out.h.push_back(static_cast<float>(r) + start);
                    out.w.push_back(static_cast<float>(c) + start);
                }
            }
        }
        return out;
    }

    // Appends the span at `index` (its bos there) with positions from `start`; returns the
    // index after its eos.
    Result<std::size_t> append_span(std::size_t index, float start) {
        const std::int64_t id = ids_[index];
        const std::int64_t second = index + 1 < ids_.size() ? ids_[index + 1] : std::int64_t{-1};
        float body_max = 0;
        std::size_t after_body = 0;
        std::int64_t eos_length = 1;
        if (id == config_.audio_start_token_id) {
            append_run(start, 1);
            OMNI_TRY(after_body, append_audio(index + 1, start + 1.0f, body_max));
            OMNI_RETURN_IF_ERROR(expect(after_body, config_.audio_end_token_id, "<|audio_end|>"));
        } else if (second == config_.image_token_id || second == config_.video_token_id) {
            append_run(start, 1);
            OMNI_TRY(after_body, append_vision(index + 1, second == config_.image_token_id,
                                               start + 1.0f, body_max));
            OMNI_RETURN_IF_ERROR(expect(after_body, config_.vision_end_token_id, "<|vision_end|>"));
        } else if (second == config_.audio_start_token_id) {
            append_run(start, 2);
            OMNI_TRY(after_body, append_video_with_audio(index + 2, start + 2.0f, body_max));
            OMNI_RETURN_IF_ERROR(expect(after_body, config_.audio_end_token_id, "<|audio_end|>"));
            OMNI_RETURN_IF_ERROR(
                expect(after_body + 1, config_.vision_end_token_id, "<|vision_end|>"));
            eos_length = 2;
        } else {
            return fail(ErrorCode::invalid_argument,
                        row(index) +
                            ": <|vision_start|> must be followed by <|image_pad|>, <|video_pad|> "
                            "or <|audio_start|>");
        }
        const float eos_start = body_max + 1.0f;
        const float eos_max = append_run(eos_start, eos_length);
        next_ = eos_max + 1.0f;
        return after_body + static_cast<std::size_t>(eos_length);
    }

    Result<std::size_t> append_audio(std::size_t index, float start, float& body_max) {
        if (audio_used_ >= media_.audio_mel_frames.size()) {
            return fail(ErrorCode::invalid_argument,
                        row(index - 1) + ": audio span #" + std::to_string(audio_used_ + 1) +
                            " has no audio item (" +
                            std::to_string(media_.audio_mel_frames.size()) + " given)");
        }
        const std::string what = "audios[" + std::to_string(audio_used_) + "]";
        OMNI_TRY(const std::int64_t count,
                 audio_token_count(media_.audio_mel_frames[audio_used_], what));
        ++audio_used_;
        OMNI_RETURN_IF_ERROR(check_pads(index, count, config_.audio_token_id, what));
        body_max = append_run(start, count);
        return index + static_cast<std::size_t>(count);
    }

    Result<const VideoItem*> next_video(std::size_t bos, bool with_audio) {
        if (video_used_ >= media_.videos.size()) {
            return fail(ErrorCode::invalid_argument,
                        row(bos) + ": video span #" + std::to_string(video_used_ + 1) +
                            " has no video item (" + std::to_string(media_.videos.size()) +
                            " given)");
        }
        const VideoItem& video = media_.videos[video_used_];
        const std::string what = "videos[" + std::to_string(video_used_) + "]";
        OMNI_RETURN_IF_ERROR(validate(video, config_, what));
        if (video.audio_mel_frames.has_value() != with_audio) {
            return fail(ErrorCode::invalid_argument,
                        row(bos) + ": " + what +
                            (with_audio ? " has no soundtrack but its span is laid out as "
                                          "audio-in-video"
                                        : " has a soundtrack (audio_mel_frames) but its span is "
                                          "not laid out as audio-in-video"));
        }
        ++video_used_;
        return &video;
    }

    Result<std::size_t> append_vision(std::size_t index, bool image, float start, float& body_max) {
        GridThw grid;
        float seconds_per_grid = 1.0f;  // images: T = g · 1 · pps
        std::string what;
        if (image) {
            if (image_used_ >= media_.images.size()) {
                return fail(ErrorCode::invalid_argument,
                            row(index - 1) + ": image span #" + std::to_string(image_used_ + 1) +
                                " has no image item (" + std::to_string(media_.images.size()) +
                                " given)");
            }
            what = "images[" + std::to_string(image_used_) + "]";
            grid = media_.images[image_used_++];
        } else {
            what = "videos[" + std::to_string(video_used_) + "]";
            OMNI_TRY(const VideoItem* video, next_video(index - 1, false));
            grid = video->grid;
            seconds_per_grid = static_cast<float>(video->second_per_grid);
        }
        OMNI_TRY(const std::int64_t count, vision_token_count(grid, config_, what));
        OMNI_RETURN_IF_ERROR(check_pads(
            index, count, image ? config_.image_token_id : config_.video_token_id, what));
        const VisionPositions body = vision_positions(grid, seconds_per_grid, start);
        body_max = start;
        for (std::size_t k = 0; k < body.t.size(); ++k) {
            push(body.t[k], body.h[k], body.w[k]);
            body_max = std::max({body_max, body.t[k], body.h[k], body.w[k]});
        }
        return index + static_cast<std::size_t>(count);
    }

    // The interleaved body of a video with its soundtrack: each pad takes the next position of
    // its own stream. body_max is the max of the body's final run of one kind (the tail
    // transformers appends last).
    Result<std::size_t> append_video_with_audio(std::size_t index, float start, float& body_max) {
        const std::string what = "videos[" + std::to_string(video_used_) + "]";
        OMNI_TRY(const VideoItem* video, next_video(index - 2, true));
        OMNI_TRY(const std::int64_t video_count, vision_token_count(video->grid, config_, what));
        OMNI_TRY(const std::int64_t audio_count,
                 audio_token_count(*video->audio_mel_frames, what + ".audio"));
        const VisionPositions vision =
            vision_positions(video->grid, static_cast<float>(video->second_per_grid), start);
        const auto total = static_cast<std::size_t>(video_count + audio_count);
        std::size_t video_index = 0;
        std::size_t audio_index = 0;
        std::size_t tail_begin = index;
        for (std::size_t at = index; at < index + total; ++at) {
            const std::int64_t id = at < ids_.size() ? ids_[at] : std::int64_t{-1};
            const bool is_video = id == config_.video_token_id;
            if ((!is_video && id != config_.audio_token_id) ||
                (is_video && video_index == vision.t.size()) ||
                (!is_video && audio_index == static_cast<std::size_t>(audio_count))) {
                return fail(ErrorCode::invalid_argument,
                            (at < ids_.size() ? row(at) : std::string("end of prompt")) + ": " +
                                what + " with its soundtrack expects " +
                                std::to_string(video_count) + " <|video_pad|> and " +
                                std::to_string(audio_count) + " <|audio_pad|> interleaved");
            }
            if (at > index && ids_[at] != ids_[at - 1]) tail_begin = at;
            if (is_video) {
                push(vision.t[video_index], vision.h[video_index], vision.w[video_index]);
                ++video_index;
            } else {
                const float position = static_cast<float>(audio_index) + start;
                push(position, position, position);
                ++audio_index;
            }
        }
        // Rows of out_ are rows of ids_, so the tail is rows [tail_begin, index + total).
        body_max = out_.positions[0][tail_begin];
        for (std::size_t at = tail_begin; at < index + total; ++at) {
            for (const auto& axis : out_.positions) body_max = std::max(body_max, axis[at]);
        }
        return index + total;
    }

    Status check_all_used() const {
        const auto unused = [](std::size_t used, std::size_t given, std::string_view kind) {
            return fail(ErrorCode::invalid_argument, "the prompt has " + std::to_string(used) +
                                                         " " + std::string(kind) + " span(s) but " +
                                                         std::to_string(given) + " " +
                                                         std::string(kind) + " item(s) were given");
        };
        if (image_used_ != media_.images.size()) {
            return unused(image_used_, media_.images.size(), "image");
        }
        if (video_used_ != media_.videos.size()) {
            return unused(video_used_, media_.videos.size(), "video");
        }
        if (audio_used_ != media_.audio_mel_frames.size()) {
            return unused(audio_used_, media_.audio_mel_frames.size(), "audio");
        }
        return ok_status();
    }

    std::span<const std::int64_t> ids_;
    const MediaItems& media_;
    const LayoutConfig& config_;
    RopeIndex out_;
    float next_ = 0;  // transformers' st_idx at the start of a loop iteration
    float max_position_ = 0;
    std::size_t image_used_ = 0;
    std::size_t video_used_ = 0;
    std::size_t audio_used_ = 0;
};

}  // namespace

Result<RopeIndex> compute_rope_index(std::span<const std::int64_t> token_ids,
                                     const MediaItems& media, const LayoutConfig& config) {
    OMNI_RETURN_IF_ERROR(validate(config));
    if (static_cast<std::int64_t>(token_ids.size()) > kMaxPromptTokens) {
        return fail(ErrorCode::out_of_range, "the prompt has " + std::to_string(token_ids.size()) +
                                                 " tokens, more than the limit of " +
                                                 std::to_string(kMaxPromptTokens));
    }
    return RopeBuilder(token_ids, media, config).build();
}

float decode_position(std::int64_t row, float rope_delta) {
    return static_cast<float>(row) + rope_delta;
}

}  // namespace omnirt::models::qwen3_omni

#include "models/qwen3_omni/layout.h"

#include <array>
#include <cmath>
#include <string>

namespace omnirt::models::qwen3_omni {
namespace {

std::string named(std::string_view what, std::string_view message) {
    std::string out(what);
    out.append(": ");
    out.append(message);
    return out;
}

}  // namespace

Status validate(const LayoutConfig& config) {
    const std::array<std::int64_t, 7> ids = {
        config.image_token_id,        config.video_token_id,      config.audio_token_id,
        config.vision_start_token_id, config.vision_end_token_id, config.audio_start_token_id,
        config.audio_end_token_id};
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0) {
            return fail(ErrorCode::invalid_argument,
                        "layout config: special token ids must be "
                        "non-negative, got " +
                            std::to_string(ids[i]));
        }
        for (std::size_t j = 0; j < i; ++j) {
            if (ids[i] == ids[j]) {
                return fail(
                    ErrorCode::invalid_argument,
                    "layout config: special token id " + std::to_string(ids[i]) + " is used twice");
            }
        }
    }
    if (config.spatial_merge_size < 1 || config.spatial_merge_size > 64) {
        return fail(ErrorCode::invalid_argument,
                    "layout config: spatial_merge_size must be in [1, 64], got " +
                        std::to_string(config.spatial_merge_size));
    }
    if (!std::isfinite(config.position_id_per_seconds) || config.position_id_per_seconds <= 0 ||
        config.position_id_per_seconds > 1000) {
        return fail(ErrorCode::invalid_argument,
                    "layout config: position_id_per_seconds must be in (0, 1000]");
    }
    return ok_status();
}

Result<std::int64_t> vision_token_count(const GridThw& grid, const LayoutConfig& config,
                                        std::string_view what) {
    const std::array<std::int64_t, 3> sides = {grid.t, grid.h, grid.w};
    for (const std::int64_t side : sides) {
        if (side < 1 || side > kMaxGridSide) {
            return fail(ErrorCode::invalid_argument,
                        named(what, "grid (t, h, w) = (" + std::to_string(grid.t) + ", " +
                                        std::to_string(grid.h) + ", " + std::to_string(grid.w) +
                                        ") must have every side in [1, " +
                                        std::to_string(kMaxGridSide) + "]"));
        }
    }
    const std::int64_t merge = config.spatial_merge_size;
    if (grid.h % merge != 0 || grid.w % merge != 0) {
        return fail(
            ErrorCode::invalid_argument,
            named(what, "grid h and w (" + std::to_string(grid.h) + ", " + std::to_string(grid.w) +
                            ") must be multiples of spatial_merge_size " + std::to_string(merge)));
    }
    // Each side <= 2^16, so the product fits in 48 bits.
    const std::int64_t tokens = grid.t * (grid.h / merge) * (grid.w / merge);
    if (tokens > kMaxPromptTokens) {
        return fail(ErrorCode::out_of_range,
                    named(what, std::to_string(tokens) + " tokens exceed the limit of " +
                                    std::to_string(kMaxPromptTokens)));
    }
    return tokens;
}

Result<std::int64_t> audio_token_count(std::int64_t mel_frames, std::string_view what) {
    if (mel_frames < 1 || mel_frames > kMaxMelFrames) {
        return fail(ErrorCode::invalid_argument,
                    named(what, "mel frame count must be in [1, " + std::to_string(kMaxMelFrames) +
                                    "], got " + std::to_string(mel_frames)));
    }
    const std::int64_t tokens = audio_output_length(mel_frames);
    if (tokens > kMaxPromptTokens) {
        return fail(ErrorCode::out_of_range,
                    named(what, std::to_string(tokens) + " audio tokens exceed the limit of " +
                                    std::to_string(kMaxPromptTokens)));
    }
    return tokens;
}

Status validate(const VideoItem& video, const LayoutConfig& config, std::string_view what) {
    if (!std::isfinite(video.second_per_grid) || video.second_per_grid <= 0 ||
        video.second_per_grid > kMaxSecondsPerGrid) {
        return fail(ErrorCode::invalid_argument,
                    named(what, "second_per_grid must be finite and in (0, " +
                                    std::to_string(static_cast<int>(kMaxSecondsPerGrid)) + "]"));
    }
    OMNI_TRY([[maybe_unused]] const std::int64_t tokens,
             vision_token_count(video.grid, config, what));
    if (video.audio_mel_frames.has_value()) {
        OMNI_TRY([[maybe_unused]] const std::int64_t audio_tokens,
                 audio_token_count(*video.audio_mel_frames, std::string(what) + ".audio"));
    }
    return ok_status();
}

}  // namespace omnirt::models::qwen3_omni

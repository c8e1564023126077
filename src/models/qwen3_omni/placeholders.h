#pragma once
// Placeholder expansion: the tokenized chat prompt carries one pad token per media item
// (chat_layout.h); the model needs one row per embedding. Mirrors the Qwen3-Omni processor
// (transformers Qwen3OmniMoeProcessor.replace_multimodal_special_tokens) on token ids:
//   <|vision_start|><|image_pad|><|vision_end|>  image pad  -> t·h·w/merge² image pads
//   <|vision_start|><|video_pad|><|vision_end|>  video pad  -> t·h·w/merge² video pads
//   <|audio_start|><|audio_pad|><|audio_end|>    audio pad  -> audio_output_length(L) audio pads
//   a video with a soundtrack (use_audio_in_video): the whole triplet becomes
//   <|vision_start|><|audio_start|>{video and audio pads interleaved}<|audio_end|><|vision_end|>
// The interleave walks both streams in time: video token j of temporal group g sits at
// g·second_per_grid·position_id_per_seconds, audio token k at k; the video token goes first
// while its time is <= the audio token's (compared in double, as the processor does); the
// stream left over is appended. The soundtrack has no placeholder of its own in the prompt.
// Pure function, safe from any thread.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/qwen3_omni/layout.h"

namespace omnirt::models::qwen3_omni {

enum class MediaKind : std::uint8_t { image, video, audio, video_audio };

// "image", "video", "audio", "video_audio".
[[nodiscard]] std::string_view to_string(MediaKind kind);

// Where one media item's embedding rows are in the expanded prompt.
struct MediaSpan {
    MediaKind kind = MediaKind::image;
    // Index into MediaItems::images, ::videos or ::audio_mel_frames by kind; video_audio (a
    // video's soundtrack) indexes ::videos.
    std::size_t index = 0;
    // Rows [begin, end) hold the item's pads. A video with a soundtrack and that soundtrack share
    // one range whose rows interleave: rows holding video_token_id are the video's embeddings in
    // order, rows holding audio_token_id the soundtrack's.
    std::size_t begin = 0;
    std::size_t end = 0;
    std::int64_t token_count = 0;  // pads of this item (== end - begin unless interleaved)
};

struct ExpandedPrompt {
    std::vector<std::int64_t> token_ids;
    // In prompt order; a video with a soundtrack gives its video span, then its video_audio span.
    std::vector<MediaSpan> spans;
};

// Expands every single pad of `prompt_ids` with the next item of its kind.
// Errors (invalid_argument unless said): an invalid config or item (layout.h); the pads of a
// kind and the items of that kind differ in number; a pad not inside its bos/eos triplet
// (<|vision_start|> / <|vision_end|> for image and video, <|audio_start|> / <|audio_end|> for
// audio); the expanded prompt longer than kMaxPromptTokens (out_of_range).
[[nodiscard]] Result<ExpandedPrompt> expand_placeholders(std::span<const std::int64_t> prompt_ids,
                                                         const MediaItems& media,
                                                         const LayoutConfig& config = {});

}  // namespace omnirt::models::qwen3_omni

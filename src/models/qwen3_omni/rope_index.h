#pragma once
// 3-D M-RoPE position ids of a Qwen3-Omni prompt (transformers' get_rope_index), computed on the
// expanded prompt (placeholders.h). Walks the prompt keeping `next`, the next free position:
//   text token                     (next, next, next); next += 1
//   image / video span             <|vision_start|> at next; body of merged tokens in raster order
//                                  per temporal group g: T = start + g·s·pps, H = start + row,
//                                  W = start + col (start = the position after the bos; s = 1 for
//                                  images, second_per_grid for videos; pps =
//                                  position_id_per_seconds); <|vision_end|> at max(body) + 1
//   audio span                     <|audio_start|>; audio token k at start + k on every axis;
//                                  <|audio_end|> at max + 1
//   video with soundtrack          <|vision_start|><|audio_start|> at next, next + 1; the video and
//                                  audio positions above (same start), each pad taking the next
//                                  position of its own stream; <|audio_end|><|vision_end|> follow
//                                  the maximum of the *last stream's tail* (transformers takes the
//                                  max of the last group it appended, which is the run of pads of
//                                  one kind ending the body, not the max of the whole body)
// Text after a span starts at the last group's max + 1. Positions are float32 and computed in
// the order of operations transformers uses, so they match its tensors bit for bit; a video's T
// can be fractional (g·s·13 for s = 2/fps) and transformers keeps it (no truncation), so text
// after such a video and rope_delta may be fractional too.
// Pure function, safe from any thread.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "models/qwen3_omni/layout.h"

namespace omnirt::models::qwen3_omni {

struct RopeIndex {
    // positions[axis][row]: axis 0 temporal, 1 height, 2 width; one entry per prompt row.
    std::array<std::vector<float>, 3> positions;
    // (max position + 1) - rows: decode row p gets position p + rope_delta (decode_position).
    float rope_delta = 0;
};

// Position ids of a full prompt whose pads are already expanded. Media items are matched to
// spans in prompt order per kind (MediaItems' documentation).
// Errors (invalid_argument unless said): an invalid config or item (layout.h); a media pad,
// <|vision_end|> or <|audio_end|> outside a span; a span whose body holds a different number of
// pads than its item's token count, or pads of the wrong kind, or that lacks its end tokens;
// <|vision_start|> followed by anything but <|image_pad|>, <|video_pad|> or <|audio_start|>; a
// video whose span layout (with or without soundtrack) disagrees with its item; more or fewer
// spans of a kind than items; more than kMaxPromptTokens rows or a position >= 2^24
// (out_of_range).
[[nodiscard]] Result<RopeIndex> compute_rope_index(std::span<const std::int64_t> token_ids,
                                                   const MediaItems& media,
                                                   const LayoutConfig& config = {});

// The position (on all three axes) of the token at cache row `row` when it is decoded after a
// prompt with `rope_delta`: row + rope_delta, in float32 as transformers adds them.
[[nodiscard]] float decode_position(std::int64_t row, float rope_delta);

}  // namespace omnirt::models::qwen3_omni

#pragma once
// What the `qwen3_omni.preprocessing` stage computes for one request (no libtorch): the chat
// rendered with the Omni layout and tokenized, every media part decoded and prepared for its
// encoder (images and videos to patches, audio to Whisper log-mel), the placeholders expanded
// and the 3-D M-RoPE positions. The output follows docs/models/qwen3_omni.md ("Stage payloads"):
//
//   input_ids i32 [n], positions i64 [3, n], rope_delta int,
//   media [{kind, key, rows i64 [m], encoder}],
//   image_items [{key, pixel_values f32 [rows, 1536], grid_thw i64 [3]}],
//   audio_items [{key, mel f32 [128, T]}]
//
// Media parts are those of serve's chat parser (inputs.messages[i].content[k] = {"type": "image"
// | "audio" | "video", "mime", "source": "bytes" | "path" | "remote_url", "data" | "path" |
// "url"}); remote URLs are fetched here (media/fetch.h, options.fetch). Errors name the part
// ("inputs.messages[0].content[1] (image): ...") and are invalid_argument (a 400), whatever the
// decoder's code: bad media is the client's.
//
// Thread safety: pure apart from reading media files; the tokenizer is used read-only.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "media/fetch.h"
#include "media/image.h"
#include "media/video.h"
#include "media/vision.h"
#include "models/qwen3_omni/layout.h"

namespace omnirt::text {
class Tokenizer;
}

namespace omnirt::models::qwen3_omni {

struct PreprocessOptions {
    LayoutConfig layout;              // token ids and merge size of the checkpoint
    bool use_audio_in_video = false;  // a video's soundtrack interleaved with its frames
    std::size_t max_media_items = 16;
    std::int64_t max_media_bytes = std::int64_t{256} << 20;  // per item, for file sources
    media::ImageLimits image_limits;
    media::VisionResizeBounds image_bounds;
    media::VideoOptions video;
    media::FetchOptions fetch;  // http(s) sources (serve passes them only with remote media on)
    bool add_generation_prompt = true;
};

// The stage's output data for `request` (inputs.messages, or inputs.prompt as plain text).
[[nodiscard]] Result<Map> preprocess_request(const OmniRequest& request,
                                             const text::Tokenizer& tokenizer,
                                             const PreprocessOptions& options);

// 64-bit FNV-1a of `bytes`, seeded: the content keys of media items.
[[nodiscard]] std::uint64_t content_key(const void* bytes, std::size_t size, std::uint64_t seed);

}  // namespace omnirt::models::qwen3_omni

// A build without FFmpeg (-DOMNIRT_FFMPEG=OFF, e.g. the GPU machine's, docs/gpu.md): the formats
// only FFmpeg decodes (BMP and GIF images, every video) and AAC output fail with unimplemented;
// JPEG, PNG and WebP images and all audio still decode.
#include "media/aac_encoder.h"
#include "media/image_internal.h"
#include "media/video.h"

namespace omnirt::media {
namespace detail {

Result<RgbImage> decode_with_ffmpeg(std::span<const std::byte>, ImageFormat format,
                                    const ImageLimits&) {
    return fail(ErrorCode::unimplemented, std::string(to_string(format)) +
                                              " images need FFmpeg, which this build lacks "
                                              "(OMNIRT_FFMPEG=OFF)");
}

bool aac_available() { return false; }

Result<std::unique_ptr<AacEncoder>> AacEncoder::create(int, int) {
    return fail(ErrorCode::unimplemented,
                "aac needs FFmpeg's encoder, which this build lacks (OMNIRT_FFMPEG=OFF)");
}

}  // namespace detail

Result<DecodedVideo> decode_video(std::span<const std::byte>, const VideoOptions&) {
    return fail(ErrorCode::unimplemented,
                "video needs FFmpeg, which this build lacks (OMNIRT_FFMPEG=OFF)");
}

}  // namespace omnirt::media

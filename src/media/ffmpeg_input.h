#pragma once
// Private to omnirt_media: FFmpeg demuxing and decoding from memory (a custom AVIOContext over
// the caller's bytes; no temp files, and FFmpeg may open nothing else), and frame -> RGB
// conversion. One object per call; not thread-safe.
#include <cstddef>
#include <memory>
#include <span>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

#include "media/image.h"

namespace omnirt::media::detail {

[[nodiscard]] std::string av_error_text(int code);
// Silences FFmpeg's own logging (once per process): every failure reaches the caller as a
// Status instead, and hostile inputs would otherwise fill stderr.
void quiet_ffmpeg_log();

struct FrameDeleter {
    void operator()(AVFrame* frame) const { av_frame_free(&frame); }
};
struct PacketDeleter {
    void operator()(AVPacket* packet) const { av_packet_free(&packet); }
};
struct CodecContextDeleter {
    void operator()(AVCodecContext* context) const { avcodec_free_context(&context); }
};
struct SwsDeleter {
    void operator()(SwsContext* context) const { sws_freeContext(context); }
};
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using CodecContextPtr = std::unique_ptr<AVCodecContext, CodecContextDeleter>;

// A demuxer reading `bytes` (which must outlive it).
class MemoryDemuxer {
  public:
    // allowed_formats: FFmpeg demuxer names accepted (comma-separated), e.g. "mov,matroska".
    // invalid_argument when the bytes are not one of them or are corrupt.
    [[nodiscard]] static Result<std::unique_ptr<MemoryDemuxer>> open(
        std::span<const std::byte> bytes, const char* allowed_formats);
    ~MemoryDemuxer();
    MemoryDemuxer(const MemoryDemuxer&) = delete;
    MemoryDemuxer& operator=(const MemoryDemuxer&) = delete;

    [[nodiscard]] AVFormatContext* format() const { return format_; }

  private:
    MemoryDemuxer() = default;

    std::span<const std::byte> bytes_;
    std::int64_t position_ = 0;
    AVIOContext* io_ = nullptr;
    AVFormatContext* format_ = nullptr;

    static int read(void* opaque, std::uint8_t* buffer, int size);
    static std::int64_t seek(void* opaque, std::int64_t offset, int whence);
};

// A single-threaded decoder for one stream.
[[nodiscard]] Result<CodecContextPtr> open_decoder(const AVStream* stream);

// Converts decoded frames to packed RGB24 (the frame's own colour matrix and range), reusing
// one swscale context.
class RgbConverter {
  public:
    [[nodiscard]] Result<RgbImage> convert(const AVFrame* frame);

  private:
    std::unique_ptr<SwsContext, SwsDeleter> context_;
};

}  // namespace omnirt::media::detail

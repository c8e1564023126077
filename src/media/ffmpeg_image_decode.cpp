// BMP and GIF (first frame) through FFmpeg's image demuxers and decoders.
#include <string>

#include "media/ffmpeg_input.h"
#include "media/image_internal.h"

namespace omnirt::media::detail {

Result<RgbImage> decode_with_ffmpeg(std::span<const std::byte> bytes, ImageFormat format,
                                    const ImageLimits& limits) {
    const char* demuxer = format == ImageFormat::gif ? "gif" : "bmp_pipe";
    OMNI_TRY(auto input, MemoryDemuxer::open(bytes, demuxer));
    AVFormatContext* context = input->format();
    const int stream_index = av_find_best_stream(context, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (stream_index < 0) return fail(ErrorCode::invalid_argument, "no image in the file");
    const AVStream* stream = context->streams[stream_index];
    OMNI_RETURN_IF_ERROR(
        check_image_size(stream->codecpar->width, stream->codecpar->height, limits));
    OMNI_TRY(CodecContextPtr decoder, open_decoder(stream));
    PacketPtr packet(av_packet_alloc());
    FramePtr frame(av_frame_alloc());
    if (!packet || !frame) return fail(ErrorCode::resource_exhausted, "out of memory");
    RgbConverter converter;
    bool flushing = false;
    for (;;) {
        const int received = avcodec_receive_frame(decoder.get(), frame.get());
        if (received == 0) {
            OMNI_RETURN_IF_ERROR(check_image_size(frame->width, frame->height, limits));
            return converter.convert(frame.get());
        }
        if (received != AVERROR(EAGAIN) || flushing) {
            return fail(ErrorCode::invalid_argument,
                        "corrupt or truncated image data: " + av_error_text(received));
        }
        const int read = av_read_frame(context, packet.get());
        if (read < 0) {
            flushing = true;
            avcodec_send_packet(decoder.get(), nullptr);
            continue;
        }
        if (packet->stream_index == stream_index) {
            const int sent = avcodec_send_packet(decoder.get(), packet.get());
            av_packet_unref(packet.get());
            if (sent < 0 && sent != AVERROR(EAGAIN)) {
                return fail(ErrorCode::invalid_argument,
                            "corrupt image data: " + av_error_text(sent));
            }
        } else {
            av_packet_unref(packet.get());
        }
    }
}

}  // namespace omnirt::media::detail

// decode_video: two passes over the container in memory. The first counts the video stream's
// packets (no decoding) to learn the frame count the sampling needs; the second decodes every
// frame (inter-frame codecs need them all) and converts only the sampled ones to RGB, while
// decoding the first audio track.
#include <algorithm>
#include <cmath>
#include <string>

#include "media/ffmpeg_input.h"
#include "media/image_internal.h"
#include "media/mel.h"
#include "media/video.h"

namespace omnirt::media {
namespace {

// Container demuxers accepted (FFmpeg names): MP4/MOV family, Matroska/WebM.
constexpr const char* kVideoContainers = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm";

double frame_rate_of(const AVStream* stream, std::int64_t packets) {
    for (AVRational rate : {stream->avg_frame_rate, stream->r_frame_rate}) {
        if (rate.num > 0 && rate.den > 0) return av_q2d(rate);
    }
    if (stream->duration > 0 && packets > 0) {
        const double seconds = static_cast<double>(stream->duration) * av_q2d(stream->time_base);
        if (seconds > 0) return static_cast<double>(packets) / seconds;
    }
    return 0.0;
}

// Appends a decoded audio frame to interleaved float samples.
Status append_audio(const AVFrame* frame, AudioBuffer& audio, double max_seconds) {
    const int channels = frame->ch_layout.nb_channels;
    if (channels <= 0 || frame->sample_rate <= 0) {
        return fail(ErrorCode::invalid_argument, "audio track has no channels or rate");
    }
    if (audio.samples.empty()) {
        audio.sample_rate = frame->sample_rate;
        audio.channels = channels;
    } else if (audio.sample_rate != frame->sample_rate || audio.channels != channels) {
        return fail(ErrorCode::invalid_argument, "audio track changes rate or channels");
    }
    const auto format = static_cast<AVSampleFormat>(frame->format);
    const bool planar = av_sample_fmt_is_planar(format) != 0;
    const AVSampleFormat packed = av_get_packed_sample_fmt(format);
    const std::int64_t count = static_cast<std::int64_t>(frame->nb_samples) * channels;
    const auto max_samples =
        static_cast<std::int64_t>(max_seconds * audio.sample_rate) * audio.channels;
    if (static_cast<std::int64_t>(audio.samples.size()) + count > max_samples) {
        return fail(ErrorCode::out_of_range,
                    "the video's audio track is longer than " + std::to_string(max_seconds) + " s");
    }
    for (int i = 0; i < frame->nb_samples; ++i) {
        for (int c = 0; c < channels; ++c) {
            const std::uint8_t* base = planar ? frame->extended_data[c] : frame->extended_data[0];
            const std::size_t index =
                planar ? static_cast<std::size_t>(i) : static_cast<std::size_t>(i) * channels + c;
            float value = 0.0f;
            switch (packed) {
                case AV_SAMPLE_FMT_FLT:
                    value = reinterpret_cast<const float*>(base)[index];
                    break;
                case AV_SAMPLE_FMT_DBL:
                    value = static_cast<float>(reinterpret_cast<const double*>(base)[index]);
                    break;
                case AV_SAMPLE_FMT_S16:
                    value = reinterpret_cast<const std::int16_t*>(base)[index] / 32768.0f;
                    break;
                case AV_SAMPLE_FMT_S32:
                    value = static_cast<float>(reinterpret_cast<const std::int32_t*>(base)[index] /
                                               2147483648.0);
                    break;
                case AV_SAMPLE_FMT_U8:
                    value = (base[index] - 128) / 128.0f;
                    break;
                default:
                    return fail(ErrorCode::unimplemented, std::string("audio sample format ") +
                                                              av_get_sample_fmt_name(format) +
                                                              " is not supported");
            }
            audio.samples.push_back(std::isfinite(value) ? value : 0.0f);
        }
    }
    return ok_status();
}

}  // namespace

Result<DecodedVideo> decode_video(std::span<const std::byte> bytes, const VideoOptions& options) {
    using namespace detail;
    // Pass 1: stream facts and the packet count.
    std::int64_t total_frames = 0;
    double video_fps = 0.0;
    int frame_width = 0;
    int frame_height = 0;
    {
        OMNI_TRY(auto input, MemoryDemuxer::open(bytes, kVideoContainers));
        AVFormatContext* format = input->format();
        const int video_index = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
        if (video_index < 0)
            return fail(ErrorCode::invalid_argument, "no video stream in the file");
        const AVStream* stream = format->streams[video_index];
        const ImageLimits frame_limits{.max_pixels = options.max_frame_pixels,
                                       .max_aspect_ratio = 200.0};
        if (Status size =
                check_image_size(stream->codecpar->width, stream->codecpar->height, frame_limits);
            !size) {
            return fail(size.error().with_context("video frame"));
        }
        frame_width = stream->codecpar->width;
        frame_height = stream->codecpar->height;
        PacketPtr packet(av_packet_alloc());
        if (!packet) return fail(ErrorCode::resource_exhausted, "out of memory");
        while (av_read_frame(format, packet.get()) >= 0) {
            if (packet->stream_index == video_index && (packet->flags & AV_PKT_FLAG_DISCARD) == 0) {
                if (++total_frames > options.max_total_frames) {
                    av_packet_unref(packet.get());
                    return fail(ErrorCode::out_of_range,
                                "video has more than " + std::to_string(options.max_total_frames) +
                                    " frames");
                }
            }
            av_packet_unref(packet.get());
        }
        video_fps = frame_rate_of(stream, total_frames);
        if (video_fps > 0 &&
            static_cast<double>(total_frames) / video_fps > options.max_duration_seconds) {
            return fail(ErrorCode::out_of_range,
                        "video lasts " + std::to_string(total_frames / video_fps) +
                            " s, more than the limit of " +
                            std::to_string(options.max_duration_seconds) + " s");
        }
    }
    OMNI_TRY(VideoSampling sampling, sample_video_frames(total_frames, video_fps, options));
    OMNI_TRY(const ResizedSize size,
             frame_size_for(frame_height, frame_width,
                            static_cast<std::int64_t>(sampling.indices.size()), options));

    // Pass 2: decode.
    OMNI_TRY(auto input, MemoryDemuxer::open(bytes, kVideoContainers));
    AVFormatContext* format = input->format();
    const int video_index = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (video_index < 0) return fail(ErrorCode::invalid_argument, "no video stream in the file");
    OMNI_TRY(CodecContextPtr video_decoder, open_decoder(format->streams[video_index]));
    int audio_index = -1;
    CodecContextPtr audio_decoder;
    if (options.decode_audio) {
        audio_index = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, video_index, nullptr, 0);
        if (audio_index >= 0) {
            auto opened = open_decoder(format->streams[audio_index]);
            if (!opened) return fail(opened.error().with_context("video's audio track"));
            audio_decoder = std::move(*opened);
        }
    }
    const ImageLimits frame_limits{.max_pixels = options.max_frame_pixels,
                                   .max_aspect_ratio = 200.0};
    DecodedVideo out;
    out.total_frames = total_frames;
    out.video_fps = video_fps;
    out.sample_fps = sampling.sample_fps;
    out.frame_indices = sampling.indices;
    out.frames.reserve(sampling.indices.size());
    AudioBuffer audio;
    RgbConverter converter;
    FramePtr frame(av_frame_alloc());
    PacketPtr packet(av_packet_alloc());
    if (!frame || !packet) return fail(ErrorCode::resource_exhausted, "out of memory");
    std::int64_t decoded = 0;
    std::size_t next = 0;
    auto drain_video = [&]() -> Status {
        for (;;) {
            const int status = avcodec_receive_frame(video_decoder.get(), frame.get());
            if (status == AVERROR(EAGAIN) || status == AVERROR_EOF) return ok_status();
            if (status < 0) {
                return fail(ErrorCode::invalid_argument,
                            "corrupt video data: " + av_error_text(status));
            }
            OMNI_RETURN_IF_ERROR(check_image_size(frame->width, frame->height, frame_limits));
            if (next < sampling.indices.size() && sampling.indices[next] == decoded) {
                OMNI_TRY(const RgbImage source, converter.convert(frame.get()));
                OMNI_TRY(RgbImage rgb, resize_bicubic(source, size.width, size.height));
                while (next < sampling.indices.size() && sampling.indices[next] == decoded) {
                    out.frames.push_back(rgb);
                    ++next;
                }
            }
            ++decoded;
            av_frame_unref(frame.get());
        }
    };
    auto drain_audio = [&]() -> Status {
        for (;;) {
            const int status = avcodec_receive_frame(audio_decoder.get(), frame.get());
            if (status == AVERROR(EAGAIN) || status == AVERROR_EOF) return ok_status();
            if (status < 0) {
                return fail(ErrorCode::invalid_argument,
                            "corrupt audio data in the video: " + av_error_text(status));
            }
            Status appended = append_audio(frame.get(), audio, options.max_audio_seconds);
            av_frame_unref(frame.get());
            OMNI_RETURN_IF_ERROR(appended);
        }
    };
    while (av_read_frame(format, packet.get()) >= 0) {
        Status status = ok_status();
        if (packet->stream_index == video_index) {
            const int sent = avcodec_send_packet(video_decoder.get(), packet.get());
            if (sent < 0 && sent != AVERROR(EAGAIN)) {
                status =
                    fail(ErrorCode::invalid_argument, "corrupt video data: " + av_error_text(sent));
            } else {
                status = drain_video();
            }
        } else if (audio_decoder && packet->stream_index == audio_index) {
            // A damaged audio packet is skipped, as players do; the video still decodes.
            if (avcodec_send_packet(audio_decoder.get(), packet.get()) >= 0) status = drain_audio();
        }
        av_packet_unref(packet.get());
        OMNI_RETURN_IF_ERROR(status);
    }
    avcodec_send_packet(video_decoder.get(), nullptr);
    OMNI_RETURN_IF_ERROR(drain_video());
    if (audio_decoder) {
        avcodec_send_packet(audio_decoder.get(), nullptr);
        OMNI_RETURN_IF_ERROR(drain_audio());
    }
    if (out.frames.empty()) {
        return fail(ErrorCode::invalid_argument, "no video frame could be decoded");
    }
    // Fewer decoded frames than packets (hidden frames, a truncated tail): the missing sampled
    // frames repeat the last one decoded.
    while (out.frames.size() < sampling.indices.size()) out.frames.push_back(out.frames.back());
    if (!audio.samples.empty()) {
        out.has_audio = true;
        OMNI_TRY(out.audio_16k_mono, to_whisper_input(audio));
    }
    return out;
}

}  // namespace omnirt::media

#pragma once
// Test helper: AAC in ADTS decoded back with FFmpeg's decoder, to check what the AAC encoder
// wrote. Needs the test to link FFmpeg (PkgConfig::FFMPEG).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "media/audio.h"
#include "media/ffmpeg_input.h"

namespace omnirt::media::testing {

// The frame lengths of the ADTS frames `bytes` consists of; empty when the bytes are not exactly
// a sequence of whole ADTS frames (bad sync word, a frame running past the end).
inline std::vector<std::size_t> adts_frame_lengths(std::span<const std::byte> bytes) {
    std::vector<std::size_t> lengths;
    std::size_t at = 0;
    auto byte = [&](std::size_t i) { return static_cast<unsigned>(bytes[at + i]); };
    while (at < bytes.size()) {
        if (bytes.size() - at < 7 || byte(0) != 0xFF || (byte(1) & 0xF6) != 0xF0) return {};
        const std::size_t length = ((byte(3) & 3u) << 11) | (byte(4) << 3) | (byte(5) >> 5);
        if (length < 7 || at + length > bytes.size()) return {};
        lengths.push_back(length);
        at += length;
    }
    return lengths;
}

// Decodes a sequence of whole ADTS frames with FFmpeg's AAC decoder (each frame one packet, as
// a client handed one streamed chunk would). The buffer's rate and channels are the stream's.
inline Result<AudioBuffer> decode_adts_frames(std::span<const std::byte> bytes) {
    const auto lengths = adts_frame_lengths(bytes);
    if (lengths.empty()) return fail(ErrorCode::invalid_argument, "not whole ADTS frames");
    const AVCodec* codec = avcodec_find_decoder(AV_CODEC_ID_AAC);
    if (codec == nullptr) return fail(ErrorCode::unimplemented, "no AAC decoder");
    detail::CodecContextPtr context(avcodec_alloc_context3(codec));
    if (!context || avcodec_open2(context.get(), codec, nullptr) < 0) {
        return fail(ErrorCode::internal, "cannot open the AAC decoder");
    }
    detail::PacketPtr packet(av_packet_alloc());
    detail::FramePtr frame(av_frame_alloc());
    AudioBuffer out;
    auto receive = [&]() -> Status {
        for (;;) {
            const int received = avcodec_receive_frame(context.get(), frame.get());
            if (received == AVERROR(EAGAIN) || received == AVERROR_EOF) return ok_status();
            if (received < 0) return fail(ErrorCode::data_loss, detail::av_error_text(received));
            if (frame->format != AV_SAMPLE_FMT_FLTP) {
                return fail(ErrorCode::internal, "unexpected sample format");
            }
            out.sample_rate = frame->sample_rate;
            out.channels = frame->ch_layout.nb_channels;
            for (int i = 0; i < frame->nb_samples; ++i) {
                for (int c = 0; c < out.channels; ++c) {
                    out.samples.push_back(
                        reinterpret_cast<const float*>(frame->extended_data[c])[i]);
                }
            }
            av_frame_unref(frame.get());
        }
    };
    std::size_t at = 0;
    for (const std::size_t length : lengths) {
        if (av_new_packet(packet.get(), static_cast<int>(length)) < 0) {
            return fail(ErrorCode::resource_exhausted, "out of memory");
        }
        std::memcpy(packet->data, bytes.data() + at, length);
        at += length;
        const int sent = avcodec_send_packet(context.get(), packet.get());
        av_packet_unref(packet.get());
        if (sent < 0) return fail(ErrorCode::data_loss, detail::av_error_text(sent));
        OMNI_RETURN_IF_ERROR(receive());
    }
    if (const int sent = avcodec_send_packet(context.get(), nullptr); sent < 0) {
        return fail(ErrorCode::data_loss, detail::av_error_text(sent));
    }
    OMNI_RETURN_IF_ERROR(receive());
    return out;
}

// The name of the format and codec FFmpeg's own probing finds in `bytes` ("aac/aac" for ADTS
// AAC), through its demuxer: the stream a player opening the file would see.
inline Result<std::string> probe_format(std::span<const std::byte> bytes) {
    OMNI_TRY(auto demuxer, detail::MemoryDemuxer::open(bytes, "aac"));
    AVFormatContext* format = demuxer->format();
    if (format->nb_streams != 1) return fail(ErrorCode::invalid_argument, "not one stream");
    return std::string(format->iformat->name) + "/" +
           avcodec_get_name(format->streams[0]->codecpar->codec_id);
}

}  // namespace omnirt::media::testing

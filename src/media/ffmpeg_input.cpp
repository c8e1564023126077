// FFmpeg from memory: AVIO callbacks over a byte span, decoders, RGB conversion.
#include "media/ffmpeg_input.h"

#include <algorithm>
#include <cstring>
#include <mutex>

extern "C" {
#include <libavutil/imgutils.h>
}

namespace omnirt::media::detail {
namespace {

constexpr int kIoBufferSize = 64 * 1024;

// FFmpeg demuxers (mov's external references, HLS-like playlists) may ask to open other
// files; from memory there is nothing else to open.
int refuse_open(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) {
    return AVERROR(EPERM);
}

}  // namespace

std::string av_error_text(int code) {
    char text[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(code, text, sizeof(text));
    return text;
}

void quiet_ffmpeg_log() {
    // Process-wide: omnirt is FFmpeg's only user in the process.
    static std::once_flag quiet;
    std::call_once(quiet, [] { av_log_set_level(AV_LOG_FATAL); });
}

int MemoryDemuxer::read(void* opaque, std::uint8_t* buffer, int size) {
    auto* self = static_cast<MemoryDemuxer*>(opaque);
    const auto total = static_cast<std::int64_t>(self->bytes_.size());
    const std::int64_t left = total - self->position_;
    if (left <= 0) return AVERROR_EOF;
    const int count = static_cast<int>(std::min<std::int64_t>(left, size));
    std::memcpy(buffer, self->bytes_.data() + self->position_, static_cast<std::size_t>(count));
    self->position_ += count;
    return count;
}

std::int64_t MemoryDemuxer::seek(void* opaque, std::int64_t offset, int whence) {
    auto* self = static_cast<MemoryDemuxer*>(opaque);
    const auto total = static_cast<std::int64_t>(self->bytes_.size());
    std::int64_t target = 0;
    switch (whence & ~AVSEEK_FORCE) {
        case AVSEEK_SIZE:
            return total;
        case SEEK_SET:
            target = offset;
            break;
        case SEEK_CUR:
            target = self->position_ + offset;
            break;
        case SEEK_END:
            target = total + offset;
            break;
        default:
            return AVERROR(EINVAL);
    }
    if (target < 0 || target > total) return AVERROR(EINVAL);
    self->position_ = target;
    return target;
}

Result<std::unique_ptr<MemoryDemuxer>> MemoryDemuxer::open(std::span<const std::byte> bytes,
                                                           const char* allowed_formats) {
    if (bytes.empty()) return fail(ErrorCode::invalid_argument, "media data is empty");
    quiet_ffmpeg_log();
    std::unique_ptr<MemoryDemuxer> self(new MemoryDemuxer());
    self->bytes_ = bytes;
    auto* buffer = static_cast<std::uint8_t*>(av_malloc(kIoBufferSize));
    if (buffer == nullptr) return fail(ErrorCode::resource_exhausted, "out of memory");
    self->io_ = avio_alloc_context(buffer, kIoBufferSize, 0, self.get(), &MemoryDemuxer::read,
                                   nullptr, &MemoryDemuxer::seek);
    if (self->io_ == nullptr) {
        av_free(buffer);
        return fail(ErrorCode::resource_exhausted, "out of memory");
    }
    self->format_ = avformat_alloc_context();
    if (self->format_ == nullptr) return fail(ErrorCode::resource_exhausted, "out of memory");
    self->format_->pb = self->io_;
    self->format_->flags |= AVFMT_FLAG_CUSTOM_IO;
    self->format_->format_whitelist = av_strdup(allowed_formats);
    self->format_->io_open = refuse_open;
    // avformat_open_input frees the context on failure.
    const int opened = avformat_open_input(&self->format_, nullptr, nullptr, nullptr);
    if (opened < 0) {
        return fail(ErrorCode::invalid_argument, "not a readable " + std::string(allowed_formats) +
                                                     " file: " + av_error_text(opened));
    }
    const int info = avformat_find_stream_info(self->format_, nullptr);
    if (info < 0) {
        return fail(ErrorCode::invalid_argument,
                    "corrupt media file (no stream information): " + av_error_text(info));
    }
    return self;
}

MemoryDemuxer::~MemoryDemuxer() {
    if (format_ != nullptr) avformat_close_input(&format_);
    if (io_ != nullptr) {
        av_freep(&io_->buffer);
        avio_context_free(&io_);
    }
}

Result<CodecContextPtr> open_decoder(const AVStream* stream) {
    const AVCodec* codec = avcodec_find_decoder(stream->codecpar->codec_id);
    if (codec == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    std::string("no decoder in this FFmpeg for codec ") +
                        avcodec_get_name(stream->codecpar->codec_id));
    }
    CodecContextPtr context(avcodec_alloc_context3(codec));
    if (!context) return fail(ErrorCode::resource_exhausted, "out of memory");
    int status = avcodec_parameters_to_context(context.get(), stream->codecpar);
    if (status < 0) {
        return fail(ErrorCode::invalid_argument, "bad codec parameters: " + av_error_text(status));
    }
    context->thread_count = 1;  // no threads of our own; deterministic output
    context->pkt_timebase = stream->time_base;
    status = avcodec_open2(context.get(), codec, nullptr);
    if (status < 0) {
        return fail(ErrorCode::invalid_argument, std::string("cannot open the ") + codec->name +
                                                     " decoder: " + av_error_text(status));
    }
    return context;
}

Result<RgbImage> RgbConverter::convert(const AVFrame* frame) {
    if (frame->width <= 0 || frame->height <= 0) {
        return fail(ErrorCode::invalid_argument, "decoded frame has no size");
    }
    const auto format = static_cast<AVPixelFormat>(frame->format);
    context_.reset(sws_getCachedContext(context_.release(), frame->width, frame->height, format,
                                        frame->width, frame->height, AV_PIX_FMT_RGB24,
                                        SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT,
                                        nullptr, nullptr, nullptr));
    if (!context_) {
        return fail(ErrorCode::invalid_argument,
                    std::string("cannot convert pixel format ") +
                        (av_get_pix_fmt_name(format) ? av_get_pix_fmt_name(format) : "?") +
                        " to RGB");
    }
    const AVPixFmtDescriptor* descriptor = av_pix_fmt_desc_get(format);
    if (descriptor != nullptr && (descriptor->flags & AV_PIX_FMT_FLAG_RGB) == 0 &&
        (descriptor->flags & AV_PIX_FMT_FLAG_PAL) == 0) {
        // YUV: use the stream's matrix (BT.601 when unspecified) and range.
        const int colorspace =
            frame->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : frame->colorspace;
        const int* coefficients = sws_getCoefficients(colorspace);
        const int full_range = frame->color_range == AVCOL_RANGE_JPEG ||
                               format == AV_PIX_FMT_YUVJ420P || format == AV_PIX_FMT_YUVJ422P ||
                               format == AV_PIX_FMT_YUVJ444P;
        sws_setColorspaceDetails(context_.get(), coefficients, full_range,
                                 sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
    }
    RgbImage image{.width = frame->width, .height = frame->height, .pixels = {}};
    image.pixels.resize(static_cast<std::size_t>(image.width) * image.height * 3);
    std::uint8_t* planes[4] = {image.pixels.data(), nullptr, nullptr, nullptr};
    int strides[4] = {image.width * 3, 0, 0, 0};
    const int rows =
        sws_scale(context_.get(), frame->data, frame->linesize, 0, frame->height, planes, strides);
    if (rows != frame->height) {
        return fail(ErrorCode::internal, "pixel conversion produced " + std::to_string(rows) +
                                             " of " + std::to_string(frame->height) + " rows");
    }
    return image;
}

}  // namespace omnirt::media::detail

// AacEncoder over FFmpeg's native "aac" encoder (AAC-LC), with the ADTS headers written here:
// an ADTS header is 7 fixed bytes per frame (ISO/IEC 14496-3, 1.A.2), simpler than a muxer
// with custom IO.
#include <soxr.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "media/aac_encoder.h"
#include "media/audio.h"
#include "media/ffmpeg_input.h"

extern "C" {
#include <libavutil/channel_layout.h>
}

namespace omnirt::media::detail {
namespace {

// The sampling_frequency_index table of ADTS; its position is the index.
constexpr std::array<int, 13> kAdtsRates = {96000, 88200, 64000, 48000, 44100, 32000, 24000,
                                            22050, 16000, 12000, 11025, 8000,  7350};
constexpr int kFallbackRate = 48000;
// Per channel; AAC-LC can carry at most 6144 bits per channel per 1024-sample frame.
constexpr std::int64_t kBitsPerSecondPerChannel = 64000;
constexpr int kMaxAdtsFrameBytes = (1 << 13) - 1;

int adts_rate_index(int rate) {
    const auto* at = std::find(kAdtsRates.begin(), kAdtsRates.end(), rate);
    return at == kAdtsRates.end() ? -1 : static_cast<int>(at - kAdtsRates.begin());
}

// The 7-byte header of one ADTS frame without CRC: MPEG-4, AAC-LC (object type 2, written as
// profile 1), `payload_bytes` of raw AAC after it.
void append_adts_header(int rate_index, int channels, int payload_bytes, std::string& out) {
    const int length = payload_bytes + 7;
    const std::array<std::uint8_t, 7> header = {
        0xFF,
        0xF1,  // sync, MPEG-4, layer 0, no CRC
        static_cast<std::uint8_t>((1 << 6) | (rate_index << 2) | (channels >> 2)),
        static_cast<std::uint8_t>(((channels & 3) << 6) | ((length >> 11) & 3)),
        static_cast<std::uint8_t>((length >> 3) & 0xFF),
        static_cast<std::uint8_t>(((length & 7) << 5) | 0x1F),  // buffer fullness 0x7FF: VBR
        0xFC,                                                   // one raw data block
    };
    out.append(reinterpret_cast<const char*>(header.data()), header.size());
}

struct SoxrDeleter {
    void operator()(soxr_t resampler) const { soxr_delete(resampler); }
};

class FfmpegAacEncoder final : public AacEncoder {
  public:
    static Result<std::unique_ptr<AacEncoder>> create(int sample_rate, int channels) {
        AudioBuffer shape{.sample_rate = sample_rate, .channels = channels, .samples = {}};
        if (Status valid = validate(shape); !valid) {
            return fail(valid.error().with_context("aac encoder"));
        }
        if (channels > 2) {
            return fail(ErrorCode::invalid_argument,
                        "aac holds 1 or 2 channels here, got " + std::to_string(channels));
        }
        const AVCodec* codec = avcodec_find_encoder_by_name("aac");
        if (codec == nullptr) {
            return fail(ErrorCode::unimplemented, "this build's FFmpeg has no AAC encoder");
        }
        quiet_ffmpeg_log();
        std::unique_ptr<FfmpegAacEncoder> self(new FfmpegAacEncoder());
        self->channels_ = channels;
        self->codec_rate_ = adts_rate_index(sample_rate) >= 0 ? sample_rate : kFallbackRate;
        self->rate_index_ = adts_rate_index(self->codec_rate_);
        if (self->codec_rate_ != sample_rate) {
            const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
            const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
            soxr_error_t error = nullptr;
            self->resampler_.reset(soxr_create(sample_rate, self->codec_rate_,
                                               static_cast<unsigned>(channels), &error, &io,
                                               &quality, nullptr));
            if (error != nullptr || !self->resampler_) {
                return fail(ErrorCode::internal,
                            std::string("cannot start the resampler for aac: ") +
                                (error != nullptr ? error : "out of memory"));
            }
            self->rate_ratio_ = static_cast<double>(self->codec_rate_) / sample_rate;
        }
        CodecContextPtr context(avcodec_alloc_context3(codec));
        if (!context) return fail(ErrorCode::resource_exhausted, "out of memory");
        context->sample_fmt = AV_SAMPLE_FMT_FLTP;
        context->sample_rate = self->codec_rate_;
        av_channel_layout_default(&context->ch_layout, channels);
        context->bit_rate =
            channels * std::min<std::int64_t>(kBitsPerSecondPerChannel, 6LL * self->codec_rate_);
        context->time_base = AVRational{1, self->codec_rate_};
        context->profile = FF_PROFILE_AAC_LOW;
        context->thread_count = 1;
        const int opened = avcodec_open2(context.get(), codec, nullptr);
        if (opened < 0) {
            return fail(ErrorCode::internal, "cannot open the aac encoder (" +
                                                 std::to_string(self->codec_rate_) + " Hz, " +
                                                 std::to_string(channels) +
                                                 " channels): " + av_error_text(opened));
        }
        self->frame_.reset(av_frame_alloc());
        self->packet_.reset(av_packet_alloc());
        if (!self->frame_ || !self->packet_) {
            return fail(ErrorCode::resource_exhausted, "out of memory");
        }
        self->frame_->format = AV_SAMPLE_FMT_FLTP;
        self->frame_->sample_rate = self->codec_rate_;
        self->frame_->nb_samples = context->frame_size;
        if (av_channel_layout_copy(&self->frame_->ch_layout, &context->ch_layout) < 0 ||
            av_frame_get_buffer(self->frame_.get(), 0) < 0) {
            return fail(ErrorCode::resource_exhausted, "out of memory");
        }
        self->context_ = std::move(context);
        return std::unique_ptr<AacEncoder>(std::move(self));
    }

    Result<std::string> push(std::span<const float> samples) override {
        if (finished_) return fail(ErrorCode::failed_precondition, "aac stream already finished");
        if (samples.empty()) return std::string();
        OMNI_RETURN_IF_ERROR(take(samples, /*flush=*/false));
        std::string out;
        OMNI_RETURN_IF_ERROR(encode_whole_frames(out));
        return out;
    }

    Result<std::string> finish() override {
        if (finished_) return fail(ErrorCode::failed_precondition, "aac stream already finished");
        finished_ = true;
        OMNI_RETURN_IF_ERROR(take({}, /*flush=*/true));
        std::string out;
        OMNI_RETURN_IF_ERROR(encode_whole_frames(out));
        if (held_frames() > 0) {
            OMNI_RETURN_IF_ERROR(encode_frame(static_cast<int>(held_frames()), out));
        }
        OMNI_RETURN_IF_ERROR(send(nullptr, out));  // drain the encoder's delay
        return out;
    }

  private:
    FfmpegAacEncoder() = default;

    [[nodiscard]] std::size_t held_frames() const {
        return (held_.size() - read_) / static_cast<std::size_t>(channels_);
    }

    // Appends `samples` (at the input rate) to held_ at the codec rate; `flush` drains the
    // resampler's delay as well.
    Status take(std::span<const float> samples, bool flush) {
        if (read_ > 0) {  // drop what earlier frames consumed
            held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(read_));
            read_ = 0;
        }
        if (!resampler_) {
            held_.insert(held_.end(), samples.begin(), samples.end());
            return ok_status();
        }
        const auto channels = static_cast<std::size_t>(channels_);
        std::size_t in_frames = samples.size() / channels;
        const float* in = samples.data();
        std::vector<float> out((static_cast<std::size_t>(in_frames * rate_ratio_) + 1024) *
                               channels);
        const std::size_t out_capacity = out.size() / channels;
        for (;;) {
            std::size_t consumed = 0;
            std::size_t produced = 0;
            // A null input asks soxr for the rest of its output (end of stream).
            const soxr_error_t error =
                soxr_process(resampler_.get(), in_frames > 0 || !flush ? in : nullptr, in_frames,
                             &consumed, out.data(), out_capacity, &produced);
            if (error != nullptr) {
                return fail(ErrorCode::internal,
                            std::string("resampling for aac failed: ") + error);
            }
            held_.insert(held_.end(), out.begin(),
                         out.begin() + static_cast<std::ptrdiff_t>(produced * channels));
            in += consumed * channels;
            in_frames -= consumed;
            if (in_frames == 0 && (!flush || produced == 0)) return ok_status();
        }
    }

    Status encode_whole_frames(std::string& out) {
        const auto frame_size = static_cast<std::size_t>(context_->frame_size);
        while (held_frames() >= frame_size) {
            OMNI_RETURN_IF_ERROR(encode_frame(context_->frame_size, out));
        }
        return ok_status();
    }

    // The next `frames` held frames as one AAC frame (fewer than frame_size only at the end).
    Status encode_frame(int frames, std::string& out) {
        AVFrame* frame = frame_.get();
        if (const int writable = av_frame_make_writable(frame); writable < 0) {
            return fail(ErrorCode::resource_exhausted,
                        "aac encoder frame: " + av_error_text(writable));
        }
        frame->nb_samples = frames;
        const float* source = held_.data() + read_;
        for (int c = 0; c < channels_; ++c) {
            auto* plane = reinterpret_cast<float*>(frame->extended_data[c]);
            for (int i = 0; i < frames; ++i) {
                const float sample = source[static_cast<std::size_t>(i) * channels_ + c];
                plane[i] = std::isnan(sample) ? 0.0f : std::clamp(sample, -1.0f, 1.0f);
            }
        }
        read_ += static_cast<std::size_t>(frames) * channels_;
        frame->pts = next_pts_;
        next_pts_ += frames;
        return send(frame, out);
    }

    // Sends `frame` (null: end of stream) and appends every packet ready as an ADTS frame.
    Status send(const AVFrame* frame, std::string& out) {
        if (const int sent = avcodec_send_frame(context_.get(), frame); sent < 0) {
            return fail(ErrorCode::internal, "aac encoder failed: " + av_error_text(sent));
        }
        for (;;) {
            const int received = avcodec_receive_packet(context_.get(), packet_.get());
            if (received == AVERROR(EAGAIN) || received == AVERROR_EOF) return ok_status();
            if (received < 0) {
                return fail(ErrorCode::internal, "aac encoder failed: " + av_error_text(received));
            }
            const int size = packet_->size;
            if (size + 7 > kMaxAdtsFrameBytes) {
                av_packet_unref(packet_.get());
                return fail(ErrorCode::internal, "aac frame of " + std::to_string(size) +
                                                     " bytes does not fit an ADTS frame");
            }
            append_adts_header(rate_index_, channels_, size, out);
            out.append(reinterpret_cast<const char*>(packet_->data),
                       static_cast<std::size_t>(size));
            av_packet_unref(packet_.get());
        }
    }

    int channels_ = 1;
    int codec_rate_ = kFallbackRate;
    int rate_index_ = 3;
    double rate_ratio_ = 1.0;
    std::unique_ptr<std::remove_pointer_t<soxr_t>, SoxrDeleter> resampler_;  // odd rates only
    CodecContextPtr context_;
    FramePtr frame_;
    PacketPtr packet_;
    std::vector<float> held_;  // interleaved, at the codec rate; from read_ on not yet encoded
    std::size_t read_ = 0;
    std::int64_t next_pts_ = 0;
    bool finished_ = false;
};

}  // namespace

bool aac_available() {
    static const bool available = avcodec_find_encoder_by_name("aac") != nullptr;
    return available;
}

Result<std::unique_ptr<AacEncoder>> AacEncoder::create(int sample_rate, int channels) {
    return FfmpegAacEncoder::create(sample_rate, channels);
}

}  // namespace omnirt::media::detail

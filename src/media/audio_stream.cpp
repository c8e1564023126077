// AudioStreamEncoder: incremental wav / pcm / aac, whole-file flac / opus / mp3 at finish().
#include <string>

#include "media/aac_encoder.h"
#include "media/internal.h"

namespace omnirt::media {

bool streams_incrementally(AudioFormat format) {
    return format == AudioFormat::wav || format == AudioFormat::pcm || format == AudioFormat::aac;
}

AudioStreamEncoder::AudioStreamEncoder(const Options& options) : options_(options) {}
AudioStreamEncoder::~AudioStreamEncoder() = default;
AudioStreamEncoder::AudioStreamEncoder(AudioStreamEncoder&&) noexcept = default;
AudioStreamEncoder& AudioStreamEncoder::operator=(AudioStreamEncoder&&) noexcept = default;

Result<AudioStreamEncoder> AudioStreamEncoder::create(const Options& options) {
    const AudioBuffer shape{
        .sample_rate = options.sample_rate, .channels = options.channels, .samples = {}};
    if (Status valid = validate(shape); !valid) {
        return fail(valid.error().with_context("audio stream"));
    }
    if (options.max_buffered_samples <= 0) {
        return fail(ErrorCode::invalid_argument, "max_buffered_samples must be positive");
    }
    if (!format_available(options.format)) {
        return fail(ErrorCode::unimplemented,
                    "this build cannot write " + std::string(to_string(options.format)));
    }
    AudioStreamEncoder encoder(options);
    if (options.format == AudioFormat::aac) {
        OMNI_TRY(encoder.aac_, detail::AacEncoder::create(options.sample_rate, options.channels));
    }
    encoder.pending_ = shape;
    return encoder;
}

Result<std::string> AudioStreamEncoder::push(const AudioBuffer& chunk) {
    if (finished_) return fail(ErrorCode::failed_precondition, "audio stream already finished");
    if (chunk.sample_rate != options_.sample_rate || chunk.channels != options_.channels) {
        return fail(ErrorCode::invalid_argument,
                    "audio chunk is " + std::to_string(chunk.sample_rate) + " Hz / " +
                        std::to_string(chunk.channels) + " channels; the stream is " +
                        std::to_string(options_.sample_rate) + " Hz / " +
                        std::to_string(options_.channels) + " channels");
    }
    OMNI_RETURN_IF_ERROR(validate(chunk));
    std::string out;
    switch (options_.format) {
        case AudioFormat::wav:
            if (!header_sent_) {
                out = detail::wav_header(options_.sample_rate, options_.channels, 0xFFFFFFFFu);
                header_sent_ = true;
            }
            [[fallthrough]];
        case AudioFormat::pcm:
            detail::append_s16le(chunk.samples, out);
            return out;
        case AudioFormat::aac:
            return aac_->push(chunk.samples);
        case AudioFormat::flac:
        case AudioFormat::opus:
        case AudioFormat::mp3:
            break;
    }
    const auto held = static_cast<std::int64_t>(pending_.samples.size());
    if (held + static_cast<std::int64_t>(chunk.samples.size()) > options_.max_buffered_samples) {
        return fail(ErrorCode::resource_exhausted,
                    "audio stream exceeds the limit of " +
                        std::to_string(options_.max_buffered_samples) + " buffered samples");
    }
    pending_.samples.insert(pending_.samples.end(), chunk.samples.begin(), chunk.samples.end());
    return out;
}

Result<std::string> AudioStreamEncoder::finish() {
    if (finished_) return fail(ErrorCode::failed_precondition, "audio stream already finished");
    finished_ = true;
    switch (options_.format) {
        case AudioFormat::wav:
            if (header_sent_) return std::string();
            header_sent_ = true;
            return detail::wav_header(options_.sample_rate, options_.channels, 0xFFFFFFFFu);
        case AudioFormat::pcm:
            return std::string();
        case AudioFormat::aac:
            return aac_->finish();
        case AudioFormat::flac:
        case AudioFormat::opus:
        case AudioFormat::mp3:
            break;
    }
    AudioBuffer whole = std::move(pending_);
    pending_ = {};
    return encode_audio(whole, options_.format);
}

}  // namespace omnirt::media

#include "client/audio_output.h"

namespace omnirt::client {

Result<std::string> AudioResponseEncoder::push(const media::AudioBuffer& audio) {
    if (!encoder_) {
        OMNI_TRY(auto encoder, media::AudioStreamEncoder::create({.format = format_,
                                                                  .sample_rate = audio.sample_rate,
                                                                  .channels = audio.channels}));
        encoder_.emplace(std::move(encoder));
    }
    seconds_ += audio.duration_seconds();
    const auto& options = encoder_->options();
    if (audio.sample_rate == options.sample_rate && audio.channels == options.channels) {
        return encoder_->push(audio);
    }
    if (audio.channels != options.channels) {
        return fail(ErrorCode::invalid_argument, "audio output changed its channel count from " +
                                                     std::to_string(options.channels) + " to " +
                                                     std::to_string(audio.channels));
    }
    OMNI_TRY(auto resampled, media::resample(audio, options.sample_rate));
    return encoder_->push(resampled);
}

Result<std::string> AudioResponseEncoder::finish() {
    if (!encoder_) return std::string();
    return encoder_->finish();
}

Result<media::AudioFormat> response_audio_format(std::string_view name) {
    if (name == "pcm16") return media::AudioFormat::pcm;
    return media::parse_audio_format(name);
}

}  // namespace omnirt::client

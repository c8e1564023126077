#pragma once
// Audio for responses: one encoder per response that turns the audio deltas of a request into
// the bytes of the requested format as they arrive (wav / pcm stream; flac, opus, mp3 come out
// whole at the end, see media::AudioStreamEncoder).
//
// Thread safety: one caller at a time per object.
#include <optional>
#include <string>

#include "core/error.h"
#include "media/audio.h"

namespace omnirt::client {

class AudioResponseEncoder {
  public:
    explicit AudioResponseEncoder(media::AudioFormat format) : format_(format) {}

    // Bytes to send now (possibly empty). The first delta fixes the sample rate and channel
    // count; later deltas of another rate are resampled to it (a stage may change its rate).
    [[nodiscard]] Result<std::string> push(const media::AudioBuffer& audio);
    // The remaining bytes ("" when no audio was ever pushed). The encoder is spent afterwards.
    [[nodiscard]] Result<std::string> finish();

    [[nodiscard]] bool started() const { return encoder_.has_value(); }
    [[nodiscard]] double seconds_pushed() const { return seconds_; }

  private:
    media::AudioFormat format_;
    std::optional<media::AudioStreamEncoder> encoder_;
    double seconds_ = 0;
};

// "pcm16" (the chat API's name) -> pcm; otherwise media::parse_audio_format.
[[nodiscard]] Result<media::AudioFormat> response_audio_format(std::string_view name);

}  // namespace omnirt::client

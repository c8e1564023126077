#pragma once
// Private to omnirt_media: AAC-LC in an ADTS stream (FFmpeg's native encoder), whole buffers
// and chunk by chunk. Every ADTS frame carries its own 7-byte header, so the bytes of each push()
// are whole frames: a client may decode them as they arrive, and the concatenation of all pushes
// and finish() is one continuous stream (the encoder keeps its state across chunks; no gaps or
// restarts at chunk seams).
//
// Rates: the 13 rates ADTS can signal (7350..96000 Hz) are kept; other rates are resampled to
// 48 kHz (libsoxr, streaming, so chunk seams stay continuous). 1 or 2 channels. The decoded
// stream starts with the encoder's priming (1024 silent frames; ADTS has no field to tell a
// decoder to skip them) and ends padded to a whole AAC frame.
//
// Thread safety: one caller at a time per object. Without FFmpeg (OMNIRT_FFMPEG=OFF) create()
// answers unimplemented and aac_available() is false.
#include <memory>
#include <span>
#include <string>

#include "core/error.h"

namespace omnirt::media::detail {

[[nodiscard]] bool aac_available();

class AacEncoder {
  public:
    // invalid_argument for a channel count other than 1 or 2 or a rate outside the media
    // limits; unimplemented without FFmpeg's AAC encoder.
    [[nodiscard]] static Result<std::unique_ptr<AacEncoder>> create(int sample_rate, int channels);
    virtual ~AacEncoder() = default;
    AacEncoder(const AacEncoder&) = delete;
    AacEncoder& operator=(const AacEncoder&) = delete;

    // Interleaved float samples (clamped to -1..1, NaN as 0) at the rate and channel count given
    // at creation; returns the ADTS frames complete so far (possibly none: the encoder holds up
    // to about two frames of samples). failed_precondition after finish().
    [[nodiscard]] virtual Result<std::string> push(std::span<const float> samples) = 0;
    // The held samples and the encoder's delay as the last ADTS frames; the encoder is spent.
    [[nodiscard]] virtual Result<std::string> finish() = 0;

  protected:
    AacEncoder() = default;
};

}  // namespace omnirt::media::detail

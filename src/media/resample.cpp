// resample and change_speed over libsoxr's one-shot API (HQ quality, float32 interleaved).
#include <soxr.h>

#include <cmath>
#include <limits>
#include <string>

#include "media/audio.h"

namespace omnirt::media {
namespace {

// Resamples treating the input as `from_rate` Hz, producing `out_frames` frames.
Result<std::vector<float>> run_soxr(const AudioBuffer& buffer, double from_rate, double to_rate,
                                    std::int64_t out_frames) {
    const auto channels = static_cast<unsigned>(buffer.channels);
    std::vector<float> out(static_cast<std::size_t>(out_frames) * channels, 0.0f);
    if (buffer.samples.empty() || out_frames == 0) return out;
    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
    std::size_t consumed = 0;
    std::size_t produced = 0;
    const soxr_error_t error =
        soxr_oneshot(from_rate, to_rate, channels, buffer.samples.data(),
                     static_cast<std::size_t>(buffer.frames()), &consumed, out.data(),
                     static_cast<std::size_t>(out_frames), &produced, &io, &quality, nullptr);
    if (error != nullptr) {
        return fail(ErrorCode::internal, std::string("resampling failed: ") + error);
    }
    // soxr delivers the full length after its flush; a short tail (rounding) stays silent.
    return out;
}

}  // namespace

std::int64_t resampled_frames(std::int64_t frames, int from_rate, int to_rate) {
    if (frames <= 0 || from_rate <= 0 || to_rate <= 0) return 0;
    // (frames * to + from / 2) / from, in 128-bit to stay exact for any int64 frame count.
    const auto numerator = static_cast<__int128>(frames) * to_rate + from_rate / 2;
    return static_cast<std::int64_t>(numerator / from_rate);
}

Result<AudioBuffer> resample(const AudioBuffer& buffer, int sample_rate) {
    OMNI_RETURN_IF_ERROR(validate(buffer));
    AudioBuffer target{.sample_rate = sample_rate, .channels = buffer.channels, .samples = {}};
    if (Status valid = validate(target); !valid) {
        return fail(valid.error().with_context("resample target"));
    }
    if (sample_rate == buffer.sample_rate) return buffer;
    const std::int64_t frames = resampled_frames(buffer.frames(), buffer.sample_rate, sample_rate);
    OMNI_TRY(target.samples, run_soxr(buffer, buffer.sample_rate, sample_rate, frames));
    return target;
}

Result<AudioBuffer> change_speed(const AudioBuffer& buffer, double factor) {
    OMNI_RETURN_IF_ERROR(validate(buffer));
    if (!std::isfinite(factor) || factor < 0.25 || factor > 4.0) {
        return fail(ErrorCode::invalid_argument,
                    "speed " + std::to_string(factor) + " is outside 0.25..4.0");
    }
    if (factor == 1.0) return buffer;
    // Read the input as if it were recorded at rate * factor and resample to rate.
    const double frames = std::round(static_cast<double>(buffer.frames()) / factor);
    AudioBuffer out{.sample_rate = buffer.sample_rate, .channels = buffer.channels, .samples = {}};
    OMNI_TRY(out.samples, run_soxr(buffer, buffer.sample_rate * factor, buffer.sample_rate,
                                   static_cast<std::int64_t>(frames)));
    return out;
}

}  // namespace omnirt::media

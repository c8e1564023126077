#pragma once
// Time-stretching that keeps pitch, for the speech API's `speed` (Rubber Band Library, its R2
// "faster" engine in real-time mode: about 1.5x cheaper than R3 here, and speech needs no more). A
// resample (audio.h's change_speed) would change the pitch with the tempo; this changes the tempo
// only.
//
// TimeStretcher takes audio chunk by chunk (a streamed response stretches each chunk as it
// arrives) and its output is time-aligned with the input: the start pad and start delay of the
// real-time mode are compensated, and finish() makes the whole output exactly
// round(input frames / speed) frames long (trims the stretcher's overrun or pads silence), so a
// streamed and a whole-buffer stretch give the same length. Speed 1 is a passthrough: push()
// returns each chunk unchanged, bit for bit.
//
// Thread safety: one TimeStretcher per stream, one caller at a time; different stretchers may
// run on different threads. CPU work: never on an IO loop thread for long inputs.
#include <cstdint>
#include <memory>

#include "core/error.h"
#include "media/audio.h"

namespace omnirt::media {

inline constexpr double kMinSpeed = 0.25;
inline constexpr double kMaxSpeed = 4.0;

class TimeStretcher {
  public:
    // invalid_argument for a speed outside [kMinSpeed, kMaxSpeed] (or not finite), a sample
    // rate outside 8000..192000 Hz (Rubber Band's range) or a channel count outside
    // 1..kMaxChannels.
    [[nodiscard]] static Result<std::unique_ptr<TimeStretcher>> create(double speed,
                                                                       int sample_rate,
                                                                       int channels);
    ~TimeStretcher();
    TimeStretcher(const TimeStretcher&) = delete;
    TimeStretcher& operator=(const TimeStretcher&) = delete;

    // The stretched audio available so far (possibly no samples). invalid_argument for a chunk
    // of another rate or channel count, failed_precondition after finish().
    [[nodiscard]] Result<AudioBuffer> push(const AudioBuffer& chunk);
    // The rest of the output; the stretcher is finished afterwards.
    [[nodiscard]] Result<AudioBuffer> finish();

    [[nodiscard]] double speed() const { return speed_; }

  private:
    struct Engine;
    TimeStretcher(double speed, int sample_rate, int channels, std::unique_ptr<Engine> engine);
    // Moves the stretcher's available output into `out`, dropping the start delay.
    void drain(AudioBuffer& out);
    AudioBuffer empty() const {
        return AudioBuffer{.sample_rate = sample_rate_, .channels = channels_};
    }

    double speed_;
    int sample_rate_;
    int channels_;
    std::unique_ptr<Engine> engine_;  // null at speed 1
    std::int64_t input_frames_ = 0;
    std::int64_t output_frames_ = 0;  // handed out
    std::int64_t delay_left_ = 0;     // output frames still to drop at the start
    bool finished_ = false;
};

// The whole buffer through one TimeStretcher: frames round(frames / speed), same rate and
// channels. Speed 1 returns a copy.
[[nodiscard]] Result<AudioBuffer> time_stretch(const AudioBuffer& buffer, double speed);

}  // namespace omnirt::media

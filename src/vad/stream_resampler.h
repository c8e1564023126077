#pragma once
// Private to omnirt_vad: streaming rational-ratio resampling to 16 kHz for the turn detector.
//
// Output sample n is the band-limited value of the input at time n * in_rate / out_rate (in
// input samples), computed with a Kaiser-windowed sinc (polyphase, one tap table per phase). It
// is emitted as soon as the input reaches the filter's right edge, so the output depends only on
// the samples fed, never on how they were split into calls: exact sample accounting, the
// timeline is not shifted (the filter is centred, the wait for its right half is the only
// latency: about 3 ms at 24 kHz). Not thread-safe.
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"

namespace omnirt::vad {

class StreamResampler {
  public:
    // invalid_argument unless 1000 <= in_rate <= 384000 and the reduced ratio's numerator
    // (out_rate / gcd) is at most 640 (every common rate: 8k, 11.025k, 22.05k, 24k, 44.1k, 48k).
    [[nodiscard]] static Result<StreamResampler> create(int in_rate, int out_rate);

    // Appends to `out` every output sample the input so far determines.
    void push(std::span<const float> in, std::vector<float>& out);
    // Forgets all input: the next sample pushed is input sample 0 again.
    void reset();

  private:
    StreamResampler() = default;

    int up_ = 1;                  // L: out_rate / gcd
    int down_ = 1;                // M: in_rate / gcd
    int half_taps_ = 0;           // H: taps on each side of the output time
    std::vector<float> taps_;     // [L][2H]: phase p, tap j weighs input floor(t) - H + 1 + j
    std::vector<float> history_;  // input samples from index history_start_ on
    std::int64_t history_start_ = 0;
    std::int64_t next_output_ = 0;
};

}  // namespace omnirt::vad

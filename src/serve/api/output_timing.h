#pragma once
// OutputTiming: the latency metrics of one generation request (time to first token, time to
// first audio, gaps between output chunks), measured from its creation (the request's arrival).
//
// Thread safety: one caller at a time (a request's events never run concurrently).
#include <chrono>
#include <optional>

#include "serve/api/metrics.h"

namespace omnirt::serve::api {

class OutputTiming {
  public:
    explicit OutputTiming(ServerMetrics& metrics)
        : metrics_(metrics), start_(std::chrono::steady_clock::now()) {}

    void text() {
        auto now = chunk();
        if (!text_seen_) metrics_.record_time_to_first_token(seconds(start_, now));
        text_seen_ = true;
    }
    void audio() {
        auto now = chunk();
        if (!audio_seen_) metrics_.record_time_to_first_audio(seconds(start_, now));
        audio_seen_ = true;
    }

  private:
    using TimePoint = std::chrono::steady_clock::time_point;
    static double seconds(TimePoint from, TimePoint to) {
        return std::chrono::duration<double>(to - from).count();
    }
    TimePoint chunk() {
        auto now = std::chrono::steady_clock::now();
        if (last_chunk_) metrics_.record_inter_chunk_gap(seconds(*last_chunk_, now));
        last_chunk_ = now;
        return now;
    }

    ServerMetrics& metrics_;
    TimePoint start_;
    std::optional<TimePoint> last_chunk_;
    bool text_seen_ = false;
    bool audio_seen_ = false;
};

}  // namespace omnirt::serve::api

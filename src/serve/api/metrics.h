#pragma once
// Server metrics in the Prometheus text exposition format (GET /metrics).
//
// Thread safety: every method may be called from any thread.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "pipeline/coordinator.h"

namespace omnirt::serve::api {

// A cumulative histogram with fixed latency buckets (seconds).
class Histogram {
  public:
    static constexpr std::array<double, 15> kBounds = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
    void observe(double seconds);
    // `name`_bucket{labels,le=...}, `name`_sum, `name`_count lines; `labels` is "" or
    // `key="value",...` without braces.
    void render(std::string& out, std::string_view name, std::string_view labels) const;

  private:
    mutable std::mutex mutex_;
    std::array<std::uint64_t, kBounds.size() + 1> counts_{};  // last: +Inf
    double sum_ = 0;
    std::uint64_t count_ = 0;
};

class ServerMetrics {
  public:
    // One finished HTTP request: `endpoint` is the route path, `status` the HTTP status.
    void record_request(std::string_view endpoint, int status, double seconds);
    void request_started() { in_flight_.fetch_add(1); }
    void request_ended() { in_flight_.fetch_sub(1); }
    [[nodiscard]] std::int64_t in_flight() const { return in_flight_.load(); }
    // Requests waiting for a generation slot (--max-queue).
    void set_queued(std::int64_t queued) { queued_.store(queued); }
    [[nodiscard]] std::int64_t queued() const { return queued_.load(); }

    // Streams whose reader fell behind (http::StreamFlow): a pause, its end (resumed, stalled or
    // the stream ended), and a stream cut for stalling.
    void stream_paused() {
        pauses_.fetch_add(1);
        paused_.fetch_add(1);
    }
    void stream_unpaused() { paused_.fetch_sub(1); }
    void stream_stalled() { stalls_.fetch_add(1); }

    void record_time_to_first_token(double seconds) { first_token_.observe(seconds); }
    void record_time_to_first_audio(double seconds) { first_audio_.observe(seconds); }
    void record_inter_chunk_gap(double seconds) { chunk_gap_.observe(seconds); }

    // The whole exposition, with per-stage gauges from `health`.
    [[nodiscard]] std::string render(const pipeline::HealthReport& health) const;

  private:
    struct EndpointStats {
        std::map<int, std::uint64_t> by_status;
        Histogram latency;
    };
    mutable std::mutex mutex_;
    std::map<std::string, EndpointStats, std::less<>> endpoints_;  // guarded by mutex_
    std::atomic<std::int64_t> in_flight_{0};
    std::atomic<std::int64_t> queued_{0};
    std::atomic<std::int64_t> paused_{0};
    std::atomic<std::uint64_t> pauses_{0};
    std::atomic<std::uint64_t> stalls_{0};
    Histogram first_token_;
    Histogram first_audio_;
    Histogram chunk_gap_;
};

}  // namespace omnirt::serve::api

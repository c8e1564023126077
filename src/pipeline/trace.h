#pragma once
// Tracer: the per-stage profiler. Between profiler_start and profiler_stop it records spans
// (queue wait, compute, relay put / get, fan-in wait) and writes them as a Chrome trace JSON
// ({"traceEvents": [{"name", "cat", "ph": "X", "ts", "dur", "pid", "tid", "args":
// {"request_id", "stage"}}]}) that chrome://tracing and Perfetto open.
//
// Thread safety: every method may be called from any thread. record() is a relaxed atomic load
// when tracing is off, so it may sit on hot paths.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace omnirt::pipeline {

struct TraceSpan {
    std::string name;      // "compute", "queue_wait", "relay_put", "relay_get", "fan_in_wait"
    std::string category;  // "scheduler", "relay", "stage"
    std::string request_id;
    std::chrono::steady_clock::time_point start;
    std::chrono::steady_clock::time_point end;
};

class Tracer {
  public:
    explicit Tracer(std::string stage_name);

    // Starts recording. The output path is `path_template` with "{stage}" replaced by the stage
    // name and "{pid}" by the process id; a template without "{stage}" gets "-<stage>" inserted
    // before its extension so stages of one process do not overwrite each other. A second start
    // while recording restarts the recording with the new template.
    void start(const std::string& path_template);
    // Stops and writes the trace; returns the path written. failed_precondition when not
    // recording; the error of the write otherwise.
    [[nodiscard]] Result<std::string> stop();

    [[nodiscard]] bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
    void record(TraceSpan span);

    // The path start() would use for `path_template` (exposed for tests).
    [[nodiscard]] std::string resolve_path(const std::string& path_template) const;

  private:
    std::string stage_name_;
    std::atomic<bool> enabled_{false};
    std::mutex mutex_;
    std::string path_;
    std::vector<TraceSpan> spans_;
    std::chrono::steady_clock::time_point origin_;
};

// Records [start, destruction) on `tracer` when it is enabled at destruction time.
class ScopedSpan {
  public:
    ScopedSpan(Tracer* tracer, std::string_view name, std::string_view category,
               std::string_view request_id);
    ScopedSpan(const ScopedSpan&) = delete;
    ScopedSpan& operator=(const ScopedSpan&) = delete;
    ~ScopedSpan();

  private:
    Tracer* tracer_;
    std::string_view name_;
    std::string_view category_;
    std::string request_id_;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace omnirt::pipeline

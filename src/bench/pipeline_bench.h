#pragma once
// `omnirt bench pipeline`: per-request latency and throughput of the runtime itself. A chain of
// N stages with no compute: the first stage produces a tensor of --payload-bytes (test.
// tensor_producer), the middle stages pass it on (test.identity), the last drops the tensor and
// answers the coordinator with its size (test.sink). Stages run in separate processes (the
// serving layout) unless --same-process puts them in one, where payloads pass by reference.
// A closed loop keeps --concurrency requests in flight until --requests completed; the first
// --warmup requests are not measured. --stage-ms makes the middle stages take that long per
// request with one worker each, --replicas runs each middle stage as that many processes (the
// scaling of a stage whose capacity is its replicas).
#include <cstdint>
#include <string>

#include "core/error.h"

namespace omnirt::bench {

struct PipelineBenchOptions {
    int stages = 3;
    std::size_t payload_bytes = 0;
    int concurrency = 1;
    int requests = 1000;
    int warmup = -1;  // -1: min(requests / 10, 1000)
    bool same_process = false;
    // The stages compute on the delivering thread while idle (factory arg inline_compute).
    bool inline_compute = false;
    std::string relay_backend = "shm";
    // Replicas (docs/pipeline.md "Replicas"): every middle stage runs this many processes.
    int replicas = 1;
    // > 0: the middle stages are test.sleep stages of one worker that take this long per
    // request (a stage of bounded capacity, like a model that serves one request at a time).
    int stage_ms = 0;
    std::string omnirt_binary;  // for the stage processes; empty: this executable
};

struct PipelineBenchReport {
    PipelineBenchOptions options;
    int measured = 0;
    int failed = 0;
    double p50_ms = 0;
    double p99_ms = 0;
    double mean_ms = 0;
    double requests_per_second = 0;
    double seconds = 0;
};

// The pipeline config the bench runs (YAML), for the docs and for tests.
[[nodiscard]] std::string pipeline_bench_config(const PipelineBenchOptions& options);
[[nodiscard]] Result<PipelineBenchReport> run_pipeline_bench(const PipelineBenchOptions& options);
[[nodiscard]] std::string format_pipeline_table(const PipelineBenchReport& report);
[[nodiscard]] std::string pipeline_report_json(const PipelineBenchReport& report);

}  // namespace omnirt::bench

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
//
// Several nodes (docs/multi_node.md): with --stage-nodes, each stage runs on the node rank the
// list gives; this process is node 0 (the coordinator and the closed loop) and the other ranks
// are `omnirt serve --nnodes N --node-rank R` processes that joined a runner::NodeHub the caller
// created (cli/bench_pipeline_command.cpp). bench/multi_node_throughput.sh runs it across two
// network namespaces next to the one-host run of the same pipeline.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "runner/node_hub.h"

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
    // Several nodes: the node rank of each stage (one entry per stage); empty: one node.
    std::vector<int> stage_nodes;
    // Several nodes: the first endpoint port on each node (config endpoints.base_port).
    int base_port = 17000;
};

// Several nodes: the head's hub, every rank joined (NodeHub::wait_for_nodes), and the nodes'
// addresses by rank. The bench hands the hub the plan and stops it when it ends.
struct PipelineBenchNodes {
    runner::NodeHub* hub = nullptr;
    std::vector<std::string> addresses;
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
// `nodes` is required (and only allowed) with options.stage_nodes.
[[nodiscard]] Result<PipelineBenchReport> run_pipeline_bench(
    const PipelineBenchOptions& options, const PipelineBenchNodes* nodes = nullptr);
[[nodiscard]] std::string format_pipeline_table(const PipelineBenchReport& report);
[[nodiscard]] std::string pipeline_report_json(const PipelineBenchReport& report);

}  // namespace omnirt::bench

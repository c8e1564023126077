#pragma once
// `omnirt bench relay`: moves tensors of several sizes from a sender process to a receiver
// process through one relay backend and reports p50/p99 transfer latency and bandwidth next to
// single-thread memcpy bandwidth measured in the same run (the ceiling for a copy).
//
// Latency of one transfer: from the sender's put_async (data already in a send buffer) to the
// receiver holding the tensor (copied, or a zero-copy view), including the control message
// (a pipe write and read, as a ZMQ message would be) — CLOCK_MONOTONIC in both processes.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace omnirt::bench {

struct RelayBenchOptions {
    std::string backend = "shm";
    std::vector<std::size_t> sizes;
    bool zero_copy = false;
    int iterations = 0;  // per size; 0 = chosen from the size (more for small sizes)
    std::size_t slot_bytes = std::size_t{64} << 20;
    std::int64_t credits = 4;
    std::string omnirt_binary;  // the binary to start as the sender (relay-peer)
};

struct RelayBenchRow {
    std::size_t size = 0;
    int iterations = 0;
    double p50_us = 0;
    double p99_us = 0;
    double gbps = 0;         // size / p50 latency
    double memcpy_gbps = 0;  // single-thread memcpy of the same size, same run
};

struct RelayBenchReport {
    std::string backend;
    bool zero_copy = false;
    std::vector<RelayBenchRow> rows;
};

[[nodiscard]] Result<RelayBenchReport> run_relay_bench(const RelayBenchOptions& options);
[[nodiscard]] std::string format_relay_table(const RelayBenchReport& report);
[[nodiscard]] std::string relay_report_json(const RelayBenchReport& report);
// "4K,64K,1M,4M,64M,256M" -> bytes (K/M/G are powers of 1024; a plain number is bytes).
[[nodiscard]] Result<std::vector<std::size_t>> parse_sizes(const std::string& text);
// The p-th percentile (p in percent, 0..100; linear interpolation) of samples (sorted copy).
[[nodiscard]] double percentile(std::vector<double> samples, double p);
// The host CPU's /proc/cpuinfo "model name" ("unknown" when absent), for benchmark reports.
[[nodiscard]] std::string cpu_model();
// Single-thread memcpy bandwidth (GB/s) for buffers of `size` bytes.
[[nodiscard]] double measure_memcpy_gbps(std::size_t size);

}  // namespace omnirt::bench

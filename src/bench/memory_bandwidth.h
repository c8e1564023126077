#pragma once
// Memory read bandwidth: the ceiling of a memory-bound computation such as a decode step, which
// reads every weight once. `threads` threads each stream through their own contiguous slice of
// one buffer (vector loads, four independent accumulators, nothing written), between two
// barriers; a pass takes from the first thread's start to the last thread's end. The buffer is
// written once beforehand by the thread that reads each slice (first touch places its pages),
// and should be far larger than the last-level cache so that the reads come from memory.
//
// Thread safety: any thread; starts and joins its own threads.
#include <cstddef>

#include "core/error.h"

namespace omnirt::bench {

struct ReadBandwidthOptions {
    std::size_t bytes = std::size_t{1} << 30;
    int threads = 1;
    int passes = 5;  // the best pass counts (least disturbed by other work)
};

struct ReadBandwidth {
    double best_gbps = 0;    // bytes / fastest pass, 1 GB = 1e9 bytes
    double median_gbps = 0;  // over the passes
    int threads = 0;
    std::size_t bytes = 0;
};

// invalid_argument for bytes under 1 MiB, threads < 1 or passes < 1; resource_exhausted when the
// buffer cannot be allocated.
[[nodiscard]] Result<ReadBandwidth> measure_read_bandwidth(const ReadBandwidthOptions& options);

// The intra-op threads a model stage (e.g. an AR thinker) uses by default (num_threads 0):
// OMP_NUM_THREADS when it is set to a positive number, else the CPUs this process may run on.
[[nodiscard]] int default_compute_threads();

}  // namespace omnirt::bench

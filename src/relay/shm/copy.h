#pragma once
// Byte copies into and out of shared memory, in one place so that the hot path can be tuned
// without touching the relay logic. Large copies are split into chunks that a small
// process-wide pool of helper threads copies alongside the caller: one core cannot saturate
// memory bandwidth, and a copy into or out of a fresh mapping also pays its page faults.
// OMNIRT_SHM_COPY_THREADS sets the number of helpers (default: a quarter of the cores on
// machines with at least 8, none below; 0 copies on the calling thread only).
#include <cstddef>

namespace omnirt::relay::shm {

// Copies `nbytes` from `source` to `destination` (no overlap). Thread-safe; blocks until all
// bytes are copied. The caller copies chunks itself too, so a copy never waits for a busy pool
// (or for helpers that do not exist, as in a forked child).
void copy_bytes(std::byte* destination, const std::byte* source, std::size_t nbytes);

// Whether copy_bytes splits a copy of `nbytes` over helper threads. A fresh mapping copied in
// parallel is best left to fault in parallel (read faults map 16 pages each); a copy on one
// thread is faster from a MAP_POPULATE'd mapping.
[[nodiscard]] bool copy_runs_in_parallel(std::size_t nbytes);

}  // namespace omnirt::relay::shm

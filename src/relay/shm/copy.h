#pragma once
// Byte copies into and out of shared memory, in one place so that the hot path can be tuned
// (streaming stores, several threads) without touching the relay logic.
#include <cstddef>

namespace omnirt::relay::shm {

// Copies `nbytes` from `source` to `destination` (no overlap). Thread-safe.
void copy_bytes(std::byte* destination, const std::byte* source, std::size_t nbytes);

}  // namespace omnirt::relay::shm

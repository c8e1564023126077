#pragma once
// The ATen intra-op threads of this process (process-wide): `requested`, or with 0 every CPU the
// process may run on unless OMP_NUM_THREADS says otherwise (libtorch's own default counts
// physical cores and comes out at 1 on some VMs). OpenBLAS's own pool (when libtorch uses it)
// gets the same count. Call before the engine's threads start.
#include <cstdint>

namespace omnirt::torch_bridge {

void set_intra_op_threads(std::int64_t requested);

// Below this width (hidden size, channels) a model's per-step matrices are too small for
// threads: a step's matmuls finish before a second thread is useful, and OpenBLAS's idle workers
// spin on sched_yield, taking the cores from the process's other stages (measured on S2-Pro's
// tiny preset, docs/benchmarks.md).
inline constexpr std::int64_t kNarrowModelWidth = 512;

// What a stage passes to set_intra_op_threads for its `num_threads` argument `requested` and a
// model `width` wide: `requested` when it is not 0 (auto); for auto, 1 below kNarrowModelWidth,
// else 0 (every CPU). The count is process-wide: stages sharing a process should agree.
[[nodiscard]] constexpr std::int64_t intra_op_threads_for(std::int64_t requested,
                                                          std::int64_t width) {
    if (requested != 0) return requested;
    return width < kNarrowModelWidth ? 1 : 0;
}

}  // namespace omnirt::torch_bridge

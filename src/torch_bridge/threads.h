#pragma once
// The ATen intra-op threads of this process (process-wide): `requested`, or with 0 every CPU the
// process may run on unless OMP_NUM_THREADS says otherwise (libtorch's own default counts
// physical cores and comes out at 1 on some VMs). OpenBLAS's own pool (when libtorch uses it)
// gets the same count. Call before the engine's threads start.
#include <cstdint>

namespace omnirt::torch_bridge {

void set_intra_op_threads(std::int64_t requested);

}  // namespace omnirt::torch_bridge

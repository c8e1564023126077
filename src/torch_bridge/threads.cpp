#include "torch_bridge/threads.h"

#include <ATen/Parallel.h>
#include <sched.h>

#include <cstdlib>

namespace omnirt::torch_bridge {

void set_intra_op_threads(std::int64_t requested) {
    if (requested == 0) {
        const char* env = std::getenv("OMP_NUM_THREADS");
        if (env != nullptr && std::atoi(env) > 0) return;
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 1) return;
        requested = CPU_COUNT(&set);
    }
    at::set_num_threads(static_cast<int>(requested));
}

}  // namespace omnirt::torch_bridge

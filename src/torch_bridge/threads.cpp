#include "torch_bridge/threads.h"

#include <ATen/Parallel.h>
#include <sched.h>

#include <cstdlib>

// OpenBLAS (libtorch's BLAS on Debian) runs its own thread pool beside ATen's, whose idle
// threads spin on sched_yield: with several stages in one process they take the cores from each
// other. Weak, so a libtorch built on another BLAS links too.
extern "C" void openblas_set_num_threads(int threads) __attribute__((weak));

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
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(static_cast<int>(requested));
}

}  // namespace omnirt::torch_bridge

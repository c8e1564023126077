#include "cli/openblas_core.h"

#include <cstdlib>

namespace omnirt::cli {

void choose_openblas_kernels() {
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
    const char* core = nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
        core = "SkylakeX";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        core = "Haswell";
    }
    if (core != nullptr) setenv("OPENBLAS_CORETYPE", core, 0);
}

}  // namespace omnirt::cli

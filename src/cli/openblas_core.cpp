#include "cli/openblas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace omnirt::cli {
namespace {

// The kernels the CPU's instructions allow: SkylakeX (AVX-512 F/BW/DQ/VL), Haswell (AVX2 and
// FMA), or none (leave OpenBLAS's choice).
const char* best_openblas_core() {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return nullptr;
}

}  // namespace

void choose_openblas_kernels(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
    const char* core = best_openblas_core();
    if (core == nullptr) return;
    // OpenBLAS comes in with libtorch, which the model plugins bring in later (dlopen): then the
    // variable, set now, is read when it loads. Where it is loaded already, it has chosen: start
    // again only if it fell back to Prescott.
    using Corename = const char* (*)();
    const auto corename = reinterpret_cast<Corename>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (setenv("OPENBLAS_CORETYPE", core, 0) != 0 || corename == nullptr) return;
    const char* chosen = corename();
    if (chosen != nullptr && std::strcmp(chosen, "Prescott") == 0) execv("/proc/self/exe", argv);
    // Here when OpenBLAS chose well, or the exec failed: go on as we are.
}

}  // namespace omnirt::cli

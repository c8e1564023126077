#pragma once
// OpenBLAS (libtorch's BLAS on Debian) picks its kernels by CPU model when it loads. Debian's
// OpenBLAS 0.3.21 does not know the newer Xeons (Emerald Rapids, model 207) and falls back to its
// SSE3 "Prescott" kernels, which run libtorch's float32 matrix products (prefill, the encoders,
// the vocoder) about five times slower than the CPU can (docs/benchmarks.md, "OpenBLAS's
// kernels"). OpenBLAS reads OPENBLAS_CORETYPE in its initializer, when it loads: for the omnirt
// binary, when a model plugin brings libtorch in (dlopen), after main() began. So, first thing in
// main() and unless the user set OPENBLAS_CORETYPE, this sets it to the best kernels the CPU's
// instructions allow (SkylakeX for AVX-512 F/BW/DQ/VL, Haswell for AVX2 and FMA); stage processes
// inherit it. (A binary that linked libtorch directly would load OpenBLAS before main() and not
// see it; omnirt does not. A .preinit_array function cannot help: the C library resets the
// environment after those run.)
namespace omnirt::cli {

void choose_openblas_kernels();

}  // namespace omnirt::cli

#pragma once
// Linear layers of a few rows on the CPU (decode steps of a batch): y = x * weight^T with float32
// sums, weight [out, in] row-major, x [rows, in]. The weight is streamed from memory once per
// call whatever the number of rows (the libraries' matrix-matrix paths read it at a fraction of
// the memory bandwidth below a few dozen rows, and per-row matrix-vector products read it once
// per row). Where AMX is enabled (OMNIRT_CPU_AMX=1, amx::enabled) and the weight has whole tiles
// (in % 32 == 0, out % 16 == 0), every bfloat16 row count runs on the tile unit
// (engine/cpu_linear_amx.h). Otherwise register
// tiles of 4 weight rows x up to 4 input rows; up to four input rows
// stream the weight rows one after another instead (sequential reads, at the memory bandwidth).
// Whichever kernel a weight takes (chosen by its shape and the CPU, never by the row count), a
// row gets the same bits alone as in a larger batch. The threads of the ATen intra-op pool take
// contiguous ranges of weight rows (AMX and streaming: chunks of 256 rows, handed out as the
// threads arrive).
// bfloat16 outputs are rounded as the scalar c10::BFloat16 conversion rounds (to nearest even,
// NaN to 0x7FC0).
//
//   bfloat16  AMX-BF16 (tdpbf16ps), else AVX512-BF16 (vdpbf16ps: products of bfloat16 pairs
//             summed in float32)
//   float32   AVX-512F FMA
//
// Both need the instructions at run time; without them (or for other dtypes and devices)
// small_batch_linear returns an undefined tensor and the caller uses at::linear.
//
// Thread safety: pure functions; any thread (they run parallel regions of the ATen pool).
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "engine/cpu_packed_weight.h"

namespace omnirt::engine::cpu {

// bfloat16 rows handled here at most; more rows (prefill) are compute-bound and go to oneDNN's
// GEMM. float32 takes any number of rows: OpenBLAS' GEMM ran ~3x slower than the tiles at 128
// rows (omnirt-linear-bench).
inline constexpr std::int64_t kSmallBatchMaxRows = 64;

// Which kernel runs (benchmarks and tests compare them; the engine uses `fastest`):
//   fastest  bfloat16 on AMX when OMNIRT_CPU_AMX=1 and the CPU has it (amx::enabled), else as
//            `vector`
//   amx      bfloat16 on AMX where the CPU has it and the shape has whole tiles (its sums differ in
//            order, so in the last bits, from the AVX512-BF16 kernel's), else as `vector`
//   vector   no AMX: up to 4 rows stream the weight rows, more take the register tiles
//   tiles    the register tiles only
enum class LinearKernel { fastest, amx, vector, tiles };

// x [rows, in] (any row stride, unit column stride) times weight [out, in] (contiguous) plus bias
// [out] when defined, in x's dtype: [rows, out]. `packed`, when given, is weight's
// PackedWeight::pack(): one to four bfloat16 rows, or one to kPackedFloatRows float32 rows, then
// read it instead of the weight (the same bits; 12 bits a weight), unless AMX takes the call or
// the kernel is `tiles`. A packing of another shape or dtype is ignored. Undefined when not
// handled (see above): other dtypes or devices, x and weight of different dtypes, no rows, bfloat16
// rows past kSmallBatchMaxRows, or a CPU without the instructions.
[[nodiscard]] at::Tensor small_batch_linear(const at::Tensor& x, const at::Tensor& weight,
                                            const at::Tensor& bias = {},
                                            LinearKernel kernel = LinearKernel::fastest,
                                            const PackedWeight* packed = nullptr);

// Whether this CPU runs the kernel of `dtype` (kBFloat16: AVX512-BF16, kFloat: AVX-512F).
[[nodiscard]] bool small_batch_linear_supported(at::ScalarType dtype);

}  // namespace omnirt::engine::cpu

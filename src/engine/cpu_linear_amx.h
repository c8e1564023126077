#pragma once
// The bfloat16 small-batch linear on Intel AMX (engine/cpu_linear.h's fast path where the CPU has
// the tile unit): y = x * w^T with float32 sums for 1..kSmallBatchMaxRows input rows.
//
// The weight is used as it lies ([out, in] row-major, no repacking at load): its rows are the A
// tiles (16 weight rows x 32 values), the input rows, interleaved in pairs once per call
// (pack_rows), are the B tiles, so a tile product computes 16 outputs of up to 16 input rows, and
// the transposed result is written back. Every output is one chain of float32 additions over k in
// order from zero (the tile unit adds the products of a pair one after the other; a bfloat16
// product is exact in float32), whatever the number of rows or the thread that computes it: a row
// gives the same bits alone and inside any batch.
//
// Needs `in` a multiple of 32 and `out` a multiple of 16 (amx_bfloat16_shape_supported); callers
// choose the kernel by the weight's shape alone, so a matrix always takes the same one.
//
// Thread safety: pure functions; each call configures the tiles of the calling thread and
// releases them before returning.
#include <cstdint>
#include <vector>

namespace omnirt::engine::cpu::amx {

// The CPU has AMX-BF16 and the kernel let this process use the tile registers (asked once).
[[nodiscard]] bool available();

// available() and the environment says OMNIRT_CPU_AMX=1: the engine's bfloat16 linears take this
// kernel (LinearKernel::fastest). Off by default: one decode row runs ~20% slower here than on the
// AVX512-BF16 streaming kernel inside a decode step (docs/benchmarks.md), and a row's bits must
// come from one kernel at every batch size.
[[nodiscard]] bool enabled();

[[nodiscard]] bool shape_supported(std::int64_t in, std::int64_t out);

// The input rows as B tiles: for each block of 16 rows, in / 2 lines of 16 pairs
// (x[m][2p], x[m][2p + 1]) in row order, rows past the last zero. Size: blocks * in * 16 values.
[[nodiscard]] std::vector<std::uint16_t> pack_rows(const std::uint16_t* x, std::int64_t x_stride,
                                                   std::int64_t rows, std::int64_t in);

// y[m * y_stride + n] = sum_k x[m][k] * w[n][k] for the `rows` input rows packed by pack_rows and
// weight rows [n_begin, n_end) (multiples of 16).
void rows_range(const std::uint16_t* packed, std::int64_t rows, const std::uint16_t* w,
                std::int64_t in, std::int64_t n_begin, std::int64_t n_end, float* y,
                std::int64_t y_stride);

}  // namespace omnirt::engine::cpu::amx

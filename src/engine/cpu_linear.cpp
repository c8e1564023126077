#include "engine/cpu_linear.h"

#include "engine/cpu_linear_amx.h"
#include "engine/cpu_vector.h"
#include "engine/lane_sums.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define OMNIRT_HAVE_X86_KERNELS 1
#define OMNIRT_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define OMNIRT_TARGET_AVX512 __attribute__((target("avx512f")))
// GCC 12 warns about its own _mm512_reduce_add_ps.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define OMNIRT_HAVE_X86_KERNELS 0
#endif

namespace omnirt::engine::cpu {
namespace {

// Register tile: kTileCols weight rows x up to kTileRows input rows of accumulators (16 of the
// 32 vector registers), plus the weight vectors and one input vector. 4 x 4 measured faster than
// 6 x 4 and 5 x 4 (about 90 % of the vdpbf16ps / FMA peak with the operands in cache).
constexpr int kTileRows = 4;
constexpr int kTileCols = 4;
// Up to this many bfloat16 input rows stream the weight rows (bfloat16_rows_stream) instead of
// going through the tiles: 2-4 rows 15-26 % faster than the tiles over a decode step's matrices
// (two threads, alternating runs), 5 rows 10 % slower.
constexpr int kStreamRows = 4;
// Up to this many float32 input rows stream the weight rows (float_rows_stream): one row 1.14x
// faster than the tiles and 1.5x faster than OpenBLAS' sgemv over a decode step's matrices; from
// four rows on no faster than the tiles (omnirt-linear-bench, docs/benchmarks.md).
constexpr int kFloatStreamRows = 4;
// float32 input rows per pass of the tiles over the weight (any number of float32 rows is taken).
constexpr std::int64_t kFloatRowsPerPass = 128;
// Weight rows whose 16 sums per input row are reduced together (bfloat16_rows_stream).
constexpr int kRowGroup = 16;
// How far ahead of its reads the streaming path prefetches the weights (into L1; one line per
// step of 32). The hardware prefetchers do not cross 4 KiB pages, and a 1024-wide weight row is
// 2 KiB: without this each new page started cold. Batch-1 decode of the Qwen3-0.6B shape 1.2-1.4x
// faster (one and two threads, alternating runs; 2 KiB ahead less, 8 KiB about the same, the L2
// hint and non-temporal slower). Past the end of a matrix it prefetches nothing harmful
// (prefetches do not fault).
constexpr std::int64_t kStreamPrefetchBytes = 4096;
// Row groups per chunk of work of the streaming path (256 rows: 512 KB of a 1024-wide weight).
constexpr std::int64_t kChunkGroups = 16;

#if OMNIRT_HAVE_X86_KERNELS

static_assert(kRowGroup == engine::detail::kGroupSums);

// acc[m][n] += the products of one vector of x row m and weight row n (masked lanes read 0).
template <int MR, int NR>
OMNIRT_TARGET_BF16 [[gnu::always_inline]] inline void bfloat16_step(
    __m512 (&acc)[MR][NR], const std::uint16_t* x, std::int64_t x_stride, const std::uint16_t* w,
    std::int64_t in, std::int64_t k, __mmask32 mask) {
    __m512i wv[NR];
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) wv[n] = _mm512_maskz_loadu_epi16(mask, w + n * in + k);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
        const __m512i xv = _mm512_maskz_loadu_epi16(mask, x + m * x_stride + k);
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) {
            acc[m][n] = _mm512_dpbf16_ps(acc[m][n], (__m512bh)xv, (__m512bh)wv[n]);
        }
    }
}

// y[m * y_stride + n] = sum_k x[m * x_stride + k] * w[n * in + k], m < MR, n < NR.
template <int MR, int NR>
OMNIRT_TARGET_BF16 void bfloat16_tile(const std::uint16_t* x, std::int64_t x_stride,
                                      const std::uint16_t* w, std::int64_t in, float* y,
                                      std::int64_t y_stride) {
    __m512 acc[MR][NR];
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_setzero_ps();
    }
    std::int64_t k = 0;
    for (; k + 32 <= in; k += 32) bfloat16_step(acc, x, x_stride, w, in, k, ~__mmask32{0});
    if (k < in) bfloat16_step(acc, x, x_stride, w, in, k, (__mmask32{1} << (in - k)) - 1);
    if constexpr (MR == 4 && NR == 4) {
        // A full tile: its 16 sums reduced together, each row's four stored at once.
        const __m512 sums = engine::detail::sum_lanes16(
            {acc[0][0], acc[0][1], acc[0][2], acc[0][3], acc[1][0], acc[1][1], acc[1][2], acc[1][3],
             acc[2][0], acc[2][1], acc[2][2], acc[2][3], acc[3][0], acc[3][1], acc[3][2],
             acc[3][3]});
        _mm_storeu_ps(y, _mm512_castps512_ps128(sums));
        _mm_storeu_ps(y + y_stride, _mm512_extractf32x4_ps(sums, 1));
        _mm_storeu_ps(y + 2 * y_stride, _mm512_extractf32x4_ps(sums, 2));
        _mm_storeu_ps(y + 3 * y_stride, _mm512_extractf32x4_ps(sums, 3));
    } else {
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
            for (int n = 0; n < NR; ++n) y[m * y_stride + n] = _mm512_reduce_add_ps(acc[m][n]);
        }
    }
}

template <int MR, int NR>
OMNIRT_TARGET_AVX512 [[gnu::always_inline]] inline void float_step(__m512 (&acc)[MR][NR],
                                                                   const float* x,
                                                                   std::int64_t x_stride,
                                                                   const float* w, std::int64_t in,
                                                                   std::int64_t k, __mmask16 mask) {
    __m512 wv[NR];
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) wv[n] = _mm512_maskz_loadu_ps(mask, w + n * in + k);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
        const __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * x_stride + k);
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_fmadd_ps(xv, wv[n], acc[m][n]);
    }
}

template <int MR, int NR>
OMNIRT_TARGET_AVX512 void float_tile(const float* x, std::int64_t x_stride, const float* w,
                                     std::int64_t in, float* y, std::int64_t y_stride) {
    __m512 acc[MR][NR];
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_setzero_ps();
    }
    std::int64_t k = 0;
    for (; k + 16 <= in; k += 16) {
        float_step(acc, x, x_stride, w, in, k, static_cast<__mmask16>(0xFFFF));
    }
    if (k < in) {
        float_step(acc, x, x_stride, w, in, k, static_cast<__mmask16>((1u << (in - k)) - 1));
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) y[m * y_stride + n] = _mm512_reduce_add_ps(acc[m][n]);
    }
}

template <class T>
using TileFn = void (*)(const T*, std::int64_t, const T*, std::int64_t, float*, std::int64_t);

// table[MR - 1][NR - 1].
template <class T, template <int, int> class Tile>
struct TileTable {
    template <int... I>
    static constexpr auto row(std::integer_sequence<int, I...>) {
        return std::array<std::array<TileFn<T>, kTileCols>, kTileRows>{
            {{Tile<I + 1, 1>::fn, Tile<I + 1, 2>::fn, Tile<I + 1, 3>::fn, Tile<I + 1, 4>::fn}...}};
    }
    static constexpr auto table = row(std::make_integer_sequence<int, kTileRows>{});
};

template <int MR, int NR>
struct BFloat16Tile {
    static constexpr TileFn<std::uint16_t> fn = bfloat16_tile<MR, NR>;
};
template <int MR, int NR>
struct FloatTile {
    static constexpr TileFn<float> fn = float_tile<MR, NR>;
};

// Weight rows [n_begin, n_end) against every input row, in register tiles. The input rows are
// split into nearly equal blocks of at most kTileRows.
template <class T, template <int, int> class Tile>
void rows_range(const T* x, std::int64_t x_stride, std::int64_t rows, const T* w, std::int64_t in,
                std::int64_t n_begin, std::int64_t n_end, float* y, std::int64_t y_stride) {
    const auto& table = TileTable<T, Tile>::table;
    const std::int64_t blocks = (rows + kTileRows - 1) / kTileRows;
    for (std::int64_t n = n_begin; n < n_end; n += kTileCols) {
        const auto nr = static_cast<int>(std::min<std::int64_t>(kTileCols, n_end - n));
        // The next weight rows are read from memory while this group's tiles run on cached
        // operands: a share of their lines is prefetched (into L2; into L1 measured slower)
        // before each tile. About 20 % faster at 32 rows and at 1 row.
        const std::int64_t next_rows = std::min<std::int64_t>(kTileCols, n_end - n - nr);
        const auto* next = reinterpret_cast<const char*>(w + (n + nr) * in);
        const std::int64_t next_lines =
            next_rows > 0 ? (next_rows * in * std::int64_t{sizeof(T)} + 63) / 64 : 0;
        std::int64_t m = 0;
        for (std::int64_t block = 0; block < blocks; ++block) {
            for (std::int64_t line = next_lines * block / blocks;
                 line < next_lines * (block + 1) / blocks; ++line) {
                _mm_prefetch(next + 64 * line, _MM_HINT_T1);
            }
            const std::int64_t end = rows * (block + 1) / blocks;
            const auto mr = static_cast<int>(end - m);
            table[mr - 1][nr - 1](x + m * x_stride, x_stride, w + n * in, in, y + m * y_stride + n,
                                  y_stride);
            m = end;
        }
    }
}

// R (1..kStreamRows) input rows: y[m * y_stride + n] = x[m] . w[n] for weight rows [n_begin,
// n_end), each weight row streamed whole before the next, with a software prefetch
// kStreamPrefetchBytes ahead. Sequential reads beat the tiles' four interleaved weight rows by
// about 25 % (one input row, a 1.2 GB set of decode matrices: 37 vs 48 ms, two threads); past four
// input rows the R input loads per weight vector make this slower than the tiles. Each output's
// sums follow the tiles' order (one accumulator over steps of 32, lanes reduced as
// _mm512_reduce_add_ps does), so a row gives the same bits here as inside a larger batch.
template <int R>
OMNIRT_TARGET_BF16 void bfloat16_rows_stream(const std::uint16_t* x, std::int64_t x_stride,
                                             const std::uint16_t* w, std::int64_t in,
                                             std::int64_t n_begin, std::int64_t n_end, float* y,
                                             std::int64_t y_stride) {
    const auto tail = static_cast<__mmask32>((std::uint64_t{1} << (in % 32)) - 1);
    for (std::int64_t n = n_begin; n < n_end; n += kRowGroup) {
        const auto count = static_cast<int>(std::min<std::int64_t>(kRowGroup, n_end - n));
        __m512 sums[R][kRowGroup];
        for (int r = 0; r < count; ++r) {
            const std::uint16_t* row = w + (n + r) * in;
            __m512 acc[R];
#pragma GCC unroll 4
            for (int m = 0; m < R; ++m) acc[m] = _mm512_setzero_ps();
            std::int64_t k = 0;
            for (; k + 32 <= in; k += 32) {
                _mm_prefetch(reinterpret_cast<const char*>(row + k) + kStreamPrefetchBytes,
                             _MM_HINT_T0);
                const auto weights = (__m512bh)_mm512_loadu_si512(row + k);
#pragma GCC unroll 4
                for (int m = 0; m < R; ++m) {
                    acc[m] = _mm512_dpbf16_ps(
                        acc[m], (__m512bh)_mm512_loadu_si512(x + m * x_stride + k), weights);
                }
            }
            if (k < in) {
                const auto weights = (__m512bh)_mm512_maskz_loadu_epi16(tail, row + k);
#pragma GCC unroll 4
                for (int m = 0; m < R; ++m) {
                    acc[m] = _mm512_dpbf16_ps(
                        acc[m], (__m512bh)_mm512_maskz_loadu_epi16(tail, x + m * x_stride + k),
                        weights);
                }
            }
#pragma GCC unroll 4
            for (int m = 0; m < R; ++m) sums[m][r] = acc[m];
        }
        engine::detail::store_group_sums<R>(sums, count, y + n, y_stride);
    }
}

// The float32 counterpart: R (1..kFloatStreamRows) input rows, each weight row streamed whole
// with one FMA accumulator per input row over steps of 16 (masked tail), the lanes reduced as
// float_tile's _mm512_reduce_add_ps does: the tiles' bits, at the memory bandwidth.
template <int R>
OMNIRT_TARGET_AVX512 void float_rows_stream(const float* x, std::int64_t x_stride, const float* w,
                                            std::int64_t in, std::int64_t n_begin,
                                            std::int64_t n_end, float* y, std::int64_t y_stride) {
    const auto tail = static_cast<__mmask16>((1u << (in % 16)) - 1);
    for (std::int64_t n = n_begin; n < n_end; n += kRowGroup) {
        const auto count = static_cast<int>(std::min<std::int64_t>(kRowGroup, n_end - n));
        __m512 sums[R][kRowGroup];
        for (int r = 0; r < count; ++r) {
            const float* row = w + (n + r) * in;
            __m512 acc[R];
#pragma GCC unroll 8
            for (int m = 0; m < R; ++m) acc[m] = _mm512_setzero_ps();
            std::int64_t k = 0;
            for (; k + 16 <= in; k += 16) {
                _mm_prefetch(reinterpret_cast<const char*>(row + k) + kStreamPrefetchBytes,
                             _MM_HINT_T0);
                const __m512 weights = _mm512_loadu_ps(row + k);
#pragma GCC unroll 8
                for (int m = 0; m < R; ++m) {
                    acc[m] =
                        _mm512_fmadd_ps(_mm512_loadu_ps(x + m * x_stride + k), weights, acc[m]);
                }
            }
            if (k < in) {
                const __m512 weights = _mm512_maskz_loadu_ps(tail, row + k);
#pragma GCC unroll 8
                for (int m = 0; m < R; ++m) {
                    acc[m] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, x + m * x_stride + k),
                                             weights, acc[m]);
                }
            }
#pragma GCC unroll 8
            for (int m = 0; m < R; ++m) sums[m][r] = acc[m];
        }
        engine::detail::store_group_sums<R>(sums, count, y + n, y_stride);
    }
}

using RowsStreamFn = void (*)(const std::uint16_t*, std::int64_t, const std::uint16_t*,
                              std::int64_t, std::int64_t, std::int64_t, float*, std::int64_t);
// [R - 1]
constexpr std::array<RowsStreamFn, kStreamRows> kRowsStream = {
    bfloat16_rows_stream<1>, bfloat16_rows_stream<2>, bfloat16_rows_stream<3>,
    bfloat16_rows_stream<4>};
using FloatRowsStreamFn = void (*)(const float*, std::int64_t, const float*, std::int64_t,
                                   std::int64_t, std::int64_t, float*, std::int64_t);
// [R - 1]
constexpr std::array<FloatRowsStreamFn, kFloatStreamRows> kFloatRowsStream = {
    float_rows_stream<1>, float_rows_stream<2>, float_rows_stream<3>, float_rows_stream<4>};

// fn(n_begin, n_end) over chunks of kChunkGroups row groups (256 weight rows) covering [0, out),
// taken in turn by the ATen pool's threads as they arrive: a thread that wakes late for this
// region takes fewer, instead of the others waiting for its fixed share.
template <class Fn>
void for_each_chunk(std::int64_t out, const Fn& fn) {
    const std::int64_t chunk_rows = kChunkGroups * kRowGroup;
    const std::int64_t chunks = (out + chunk_rows - 1) / chunk_rows;
    std::atomic<std::int64_t> next_chunk{0};
    at::parallel_for(0, std::min<std::int64_t>(chunks, at::get_num_threads()), 1,
                     [&](std::int64_t, std::int64_t) {
                         for (std::int64_t chunk = next_chunk.fetch_add(1); chunk < chunks;
                              chunk = next_chunk.fetch_add(1)) {
                             const std::int64_t n_begin = chunk * chunk_rows;
                             fn(n_begin, std::min(out, n_begin + chunk_rows));
                         }
                     });
}

// to[i] = bfloat16(from[i]) for i < count, rounded as the scalar c10::BFloat16 conversion rounds
// (cpu_vector.h's store8: to nearest even, NaN to 0x7FC0): the values of an
// at::Tensor::to(kBFloat16) of the float32 sums (ATen's vectorized conversion may spell NaN
// differently).
OMNIRT_KERNEL_CLONES void to_bfloat16(const float* from, c10::BFloat16* to, std::int64_t count) {
    std::int64_t i = 0;
    for (; i + 8 <= count; i += 8) store8(to + i, load8(from + i));
    for (; i < count; ++i) to[i] = static_cast<c10::BFloat16>(from[i]);
}

#endif  // OMNIRT_HAVE_X86_KERNELS

}  // namespace

bool small_batch_linear_supported(at::ScalarType dtype) {
#if OMNIRT_HAVE_X86_KERNELS
    if (dtype == at::kBFloat16) {
        static const bool bf16 = __builtin_cpu_supports("avx512bf16") &&
                                 __builtin_cpu_supports("avx512bw") &&
                                 __builtin_cpu_supports("avx512f");
        return bf16;
    }
    if (dtype == at::kFloat) {
        static const bool avx512 = __builtin_cpu_supports("avx512f");
        return avx512;
    }
#endif
    return false;
}

at::Tensor small_batch_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              LinearKernel kernel, const PackedWeight* packed) {
#if OMNIRT_HAVE_X86_KERNELS
    const at::ScalarType type = x.scalar_type();
    if (x.dim() != 2 || weight.dim() != 2 || !x.device().is_cpu() || !weight.device().is_cpu() ||
        weight.scalar_type() != type || !weight.is_contiguous() || x.size(1) != weight.size(1) ||
        x.size(0) < 1 || (type != at::kFloat && x.size(0) > kSmallBatchMaxRows) ||
        !small_batch_linear_supported(type) ||
        (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0)))) {
        return {};
    }
    const at::Tensor input = x.stride(1) == 1 ? x : x.contiguous();
    const std::int64_t rows = input.size(0);
    const std::int64_t in = input.size(1);
    const std::int64_t out = weight.size(0);
    at::Tensor y = at::empty({rows, out}, input.options().dtype(at::kFloat));
    float* y_data = y.data_ptr<float>();
    const std::int64_t groups = (out + kTileCols - 1) / kTileCols;
    // At least 64 weight rows per task: a task's setup is negligible next to its reads.
    constexpr std::int64_t kGrainGroups = 16;
    if (type == at::kBFloat16) {
        const auto* x_data = reinterpret_cast<const std::uint16_t*>(input.data_ptr());
        const auto* w_data = reinterpret_cast<const std::uint16_t*>(weight.data_ptr());
        // Without a bias each task rounds its own outputs to bfloat16 (no separate pass).
        at::Tensor rounded;
        c10::BFloat16* rounded_data = nullptr;
        if (!bias.defined()) {
            rounded = at::empty({rows, out}, input.options());
            rounded_data = rounded.data_ptr<c10::BFloat16>();
        }
        const auto round_columns = [&](std::int64_t n_begin, std::int64_t n_end) {
            if (rounded_data == nullptr) return;
            for (std::int64_t m = 0; m < rows; ++m) {
                to_bfloat16(y_data + m * out + n_begin, rounded_data + m * out + n_begin,
                            n_end - n_begin);
            }
        };
        const bool use_amx = (kernel == LinearKernel::fastest && amx::enabled()) ||
                             (kernel == LinearKernel::amx && amx::available());
        if (use_amx && amx::shape_supported(in, out)) {
            // Every row count on the tile unit: one summation order for all.
            const std::vector<std::uint16_t> tile_rows =
                amx::pack_rows(x_data, input.stride(0), rows, in);
            for_each_chunk(out, [&](std::int64_t n_begin, std::int64_t n_end) {
                amx::rows_range(tile_rows.data(), rows, w_data, in, n_begin, n_end, y_data, out);
                round_columns(n_begin, n_end);
            });
        } else if (packed != nullptr && packed->dtype() == at::kBFloat16 &&
                   kernel != LinearKernel::tiles && rows <= kStreamRows && packed->out() == out &&
                   packed->in() == in) {
            for_each_chunk(out, [&](std::int64_t n_begin, std::int64_t n_end) {
                packed_rows_stream(static_cast<int>(rows), x_data, input.stride(0), *packed,
                                   n_begin, n_end, y_data, out);
                round_columns(n_begin, n_end);
            });
        } else if (kernel != LinearKernel::tiles && rows <= kStreamRows) {
            const RowsStreamFn stream = kRowsStream[static_cast<std::size_t>(rows - 1)];
            for_each_chunk(out, [&](std::int64_t n_begin, std::int64_t n_end) {
                stream(x_data, input.stride(0), w_data, in, n_begin, n_end, y_data, out);
                round_columns(n_begin, n_end);
            });
        } else {
            at::parallel_for(0, groups, kGrainGroups, [&](std::int64_t begin, std::int64_t end) {
                const std::int64_t n_end = std::min(out, end * kTileCols);
                rows_range<std::uint16_t, BFloat16Tile>(x_data, input.stride(0), rows, w_data, in,
                                                        begin * kTileCols, n_end, y_data, out);
                round_columns(begin * kTileCols, n_end);
            });
        }
        if (rounded.defined()) return rounded;
    } else {
        const float* x_data = input.data_ptr<float>();
        const float* w_data = weight.data_ptr<float>();
        if (packed != nullptr && packed->dtype() == at::kFloat && kernel != LinearKernel::tiles &&
            rows <= kPackedFloatRows && packed->out() == out && packed->in() == in) {
            for_each_chunk(out, [&](std::int64_t n_begin, std::int64_t n_end) {
                packed_rows_stream_float(static_cast<int>(rows), x_data, input.stride(0), *packed,
                                         n_begin, n_end, y_data, out);
            });
        } else if (kernel != LinearKernel::tiles && rows <= kFloatStreamRows) {
            const FloatRowsStreamFn stream = kFloatRowsStream[static_cast<std::size_t>(rows - 1)];
            for_each_chunk(out, [&](std::int64_t n_begin, std::int64_t n_end) {
                stream(x_data, input.stride(0), w_data, in, n_begin, n_end, y_data, out);
            });
        } else {
            // Past kFloatRowsPerPass rows (prefill) the tiles take the rows in passes, each
            // reading the weight once: a pass's input rows stay in L2 while a thread's weight
            // rows run against them.
            for (std::int64_t first = 0; first < rows; first += kFloatRowsPerPass) {
                const std::int64_t pass_rows = std::min(kFloatRowsPerPass, rows - first);
                const float* pass_x = x_data + first * input.stride(0);
                float* pass_y = y_data + first * out;
                at::parallel_for(
                    0, groups, kGrainGroups, [&](std::int64_t begin, std::int64_t end) {
                        rows_range<float, FloatTile>(pass_x, input.stride(0), pass_rows, w_data, in,
                                                     begin * kTileCols,
                                                     std::min(out, end * kTileCols), pass_y, out);
                    });
            }
        }
    }
    if (bias.defined()) y.add_(bias.to(at::kFloat));
    return type == at::kFloat ? y : y.to(type);
#else
    (void)x;
    (void)weight;
    (void)bias;
    (void)kernel;
    (void)packed;
    return {};
#endif
}

}  // namespace omnirt::engine::cpu

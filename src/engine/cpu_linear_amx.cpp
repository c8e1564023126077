#include "engine/cpu_linear_amx.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define OMNIRT_HAVE_AMX_KERNEL 1
#define OMNIRT_TARGET_AMX __attribute__((target("avx512f,amx-tile,amx-bf16")))
// GCC 12 warns about its own AVX-512 unpack intrinsics.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define OMNIRT_HAVE_AMX_KERNEL 0
#endif

namespace omnirt::engine::cpu::amx {
namespace {

// Input rows per B tile and weight rows per A tile (and the sides of a float32 C tile).
constexpr std::int64_t kBlock = 16;
// Values of k per tile product (32 bfloat16 = one 64-byte line of a tile row).
constexpr std::int64_t kStep = 32;

#if OMNIRT_HAVE_AMX_KERNEL

// The 64-byte tile configuration (palette 1): every tile 16 rows of 64 bytes. Partial blocks
// (fewer than 16 input rows) are computed whole on the zero rows pack_rows adds; the tile unit's
// time is not what limits a decode step.
struct alignas(64) TileConfig {
    std::uint8_t palette = 1;
    std::uint8_t start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};

OMNIRT_TARGET_AMX void configure_tiles() {
    TileConfig config;
    for (int tile = 0; tile < 8; ++tile) {
        config.colsb[tile] = 64;
        config.rows[tile] = kBlock;
    }
    _tile_loadconfig(&config);
}

// The 16 x 16 32-bit matrix in r, transposed in place (row c of the result = column c).
OMNIRT_TARGET_AMX [[gnu::always_inline]] inline void transpose16(__m512i (&r)[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + j], 128-bit lane L: element 4L + j of rows 4i .. 4i + 3.
    __m512i u[16];
    for (int i = 0; i < 4; ++i) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; ++j) {
        const __m512i s0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i s1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
        const __m512i s2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i s3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
        r[0 + j] = _mm512_shuffle_i32x4(s0, s2, 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
        r[4 + j] = _mm512_shuffle_i32x4(s1, s3, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
    }
}

// A stored C tile (16 weight rows x 16 input rows, row-major) into y transposed: y[m][i] for
// m < rows, i < 16.
OMNIRT_TARGET_AMX [[gnu::always_inline]] inline void store_transposed(const float* sums, float* y,
                                                                      std::int64_t y_stride,
                                                                      std::int64_t rows) {
    __m512i r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(sums + 16 * i);
    transpose16(r);
    for (std::int64_t m = 0; m < rows; ++m) _mm512_storeu_si512(y + m * y_stride, r[m]);
}

// Weight blocks of one group (tiles 0..3 hold their sums).
constexpr std::int64_t kMaxWeightBlocks = 4;

// Weight rows [n, n + 16 * WB) against the input rows of block `b` (rows of it: `mr`), over the
// whole of k: C tiles 0..WB-1, A tiles 4 and 5 in turn, B tile 6. The next `next_lines` 64-byte
// lines from `next` are prefetched into L2, spread over the steps.
template <int WB>
OMNIRT_TARGET_AMX void weight_blocks(const std::uint16_t* packed_block, std::int64_t mr,
                                     const std::uint16_t* w, std::int64_t in, float* y,
                                     std::int64_t y_stride, const char* next,
                                     std::int64_t next_lines) {
    const std::int64_t w_stride = in * 2;
    const std::int64_t steps = in / kStep;
    _tile_zero(0);
    if constexpr (WB > 1) _tile_zero(1);
    if constexpr (WB > 2) _tile_zero(2);
    if constexpr (WB > 3) _tile_zero(3);
    std::int64_t line = 0;
    for (std::int64_t s = 0; s < steps; ++s) {
        const std::int64_t line_end = next_lines * (s + 1) / steps;
        for (; line < line_end; ++line) _mm_prefetch(next + 64 * line, _MM_HINT_T1);
        const std::uint16_t* ws = w + s * kStep;
        _tile_loadd(6, packed_block + s * kBlock * kStep, 64);
        _tile_loadd(4, ws, w_stride);
        _tile_dpbf16ps(0, 4, 6);
        if constexpr (WB > 1) {
            _tile_loadd(5, ws + kBlock * in, w_stride);
            _tile_dpbf16ps(1, 5, 6);
        }
        if constexpr (WB > 2) {
            _tile_loadd(4, ws + 2 * kBlock * in, w_stride);
            _tile_dpbf16ps(2, 4, 6);
        }
        if constexpr (WB > 3) {
            _tile_loadd(5, ws + 3 * kBlock * in, w_stride);
            _tile_dpbf16ps(3, 5, 6);
        }
    }
    // (The tile intrinsics take the tile's number as a literal.)
    alignas(64) float sums[kMaxWeightBlocks][kBlock * kBlock];
    _tile_stored(0, sums[0], 64);
    if constexpr (WB > 1) _tile_stored(1, sums[1], 64);
    if constexpr (WB > 2) _tile_stored(2, sums[2], 64);
    if constexpr (WB > 3) _tile_stored(3, sums[3], 64);
    for (int block = 0; block < WB; ++block) {
        store_transposed(sums[block], y + block * kBlock, y_stride, mr);
    }
}

using WeightBlocksFn = void (*)(const std::uint16_t*, std::int64_t, const std::uint16_t*,
                                std::int64_t, float*, std::int64_t, const char*, std::int64_t);
// [WB - 1]
constexpr WeightBlocksFn kWeightBlocks[4] = {weight_blocks<1>, weight_blocks<2>, weight_blocks<3>,
                                             weight_blocks<4>};

OMNIRT_TARGET_AMX void pack_block(const std::uint16_t* x, std::int64_t x_stride, std::int64_t rows,
                                  std::int64_t in, std::uint16_t* out) {
    for (std::int64_t p = 0; p < in / 2; p += kBlock) {
        __m512i r[16];
        for (std::int64_t m = 0; m < kBlock; ++m) {
            r[m] = m < rows ? _mm512_loadu_si512(x + m * x_stride + 2 * p) : _mm512_setzero_si512();
        }
        transpose16(r);
        for (std::int64_t q = 0; q < kBlock; ++q) {
            _mm512_storeu_si512(out + (p + q) * 2 * kBlock, r[q]);
        }
    }
}

OMNIRT_TARGET_AMX void rows_range_amx(const std::uint16_t* packed, std::int64_t rows,
                                      const std::uint16_t* w, std::int64_t in, std::int64_t n_begin,
                                      std::int64_t n_end, float* y, std::int64_t y_stride) {
    configure_tiles();
    const std::int64_t blocks = (rows + kBlock - 1) / kBlock;
    for (std::int64_t n = n_begin; n < n_end; n += kMaxWeightBlocks * kBlock) {
        const std::int64_t wb = std::min(kMaxWeightBlocks, (n_end - n) / kBlock);
        // The group after this one, read while this one's blocks run on cached lines.
        const std::int64_t next_rows = std::min(kMaxWeightBlocks * kBlock, n_end - n - wb * kBlock);
        const auto* next = reinterpret_cast<const char*>(w + (n + wb * kBlock) * in);
        const std::int64_t next_lines = next_rows * in * 2 / 64;
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::int64_t lines_begin = next_lines * b / blocks;
            const std::int64_t lines_end = next_lines * (b + 1) / blocks;
            kWeightBlocks[wb - 1](packed + b * in * kBlock, std::min(kBlock, rows - b * kBlock),
                                  w + n * in, in, y + b * kBlock * y_stride + n, y_stride,
                                  next + 64 * lines_begin, lines_end - lines_begin);
        }
    }
    _tile_release();
}

#endif  // OMNIRT_HAVE_AMX_KERNEL

}  // namespace

bool available() {
#if OMNIRT_HAVE_AMX_KERNEL
    static const bool usable = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
        const bool amx_bf16 = (edx >> 22) & 1u;
        const bool amx_tile = (edx >> 24) & 1u;
        const bool avx512f = (ebx >> 16) & 1u;
        if (!amx_bf16 || !amx_tile || !avx512f) return false;
        // Linux hands out the tile registers' state only on request (arch_prctl
        // ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), for the whole process.
        constexpr int kRequestPermission = 0x1023;
        constexpr int kTileData = 18;
        return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
    }();
    return usable;
#else
    return false;
#endif
}

bool enabled() {
    static const bool on = [] {
        const char* setting = std::getenv("OMNIRT_CPU_AMX");
        return setting != nullptr && std::string_view(setting) == "1" && available();
    }();
    return on;
}

bool shape_supported(std::int64_t in, std::int64_t out) {
    return in > 0 && out > 0 && in % kStep == 0 && out % kBlock == 0;
}

std::vector<std::uint16_t> pack_rows(const std::uint16_t* x, std::int64_t x_stride,
                                     std::int64_t rows, std::int64_t in) {
    const std::int64_t blocks = (rows + kBlock - 1) / kBlock;
    std::vector<std::uint16_t> packed(static_cast<std::size_t>(blocks * in * kBlock));
#if OMNIRT_HAVE_AMX_KERNEL
    for (std::int64_t b = 0; b < blocks; ++b) {
        pack_block(x + b * kBlock * x_stride, x_stride, std::min(kBlock, rows - b * kBlock), in,
                   packed.data() + b * in * kBlock);
    }
#else
    (void)x;
    (void)x_stride;
#endif
    return packed;
}

void rows_range(const std::uint16_t* packed, std::int64_t rows, const std::uint16_t* w,
                std::int64_t in, std::int64_t n_begin, std::int64_t n_end, float* y,
                std::int64_t y_stride) {
#if OMNIRT_HAVE_AMX_KERNEL
    rows_range_amx(packed, rows, w, in, n_begin, n_end, y, y_stride);
#else
    (void)packed;
    (void)rows;
    (void)w;
    (void)in;
    (void)n_begin;
    (void)n_end;
    (void)y;
    (void)y_stride;
#endif
}

}  // namespace omnirt::engine::cpu::amx

#include "engine/cpu_packed_weight.h"

#include "engine/cpu_linear.h"
#include "engine/lane_sums.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define OMNIRT_HAVE_PACKED_KERNEL 1
#define OMNIRT_TARGET_PACKED __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
// GCC 12 warns about its own _mm512_reduce_add_ps.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define OMNIRT_HAVE_PACKED_KERNEL 0
#endif

namespace omnirt::engine::cpu {
namespace {

constexpr std::int64_t kB = PackedWeight::kBlockWeights;
// More escapes than 1 weight in this many: not packed.
constexpr std::int64_t kMaxEscapeShare = 256;
// How far ahead of its reads the kernel prefetches (into L1), as the bfloat16 streaming kernel.
constexpr std::int64_t kPrefetchBytes = 4096;

// The block slot of element e (the header's order).
constexpr int slot_of(int e) { return e < 8 || e >= 24 ? e : e < 16 ? e + 8 : e - 8; }

// The element in slot s (slot_of's inverse).
constexpr int element_of(int s) { return s < 8 || s >= 24 ? s : s < 16 ? s + 8 : s - 8; }

static_assert(slot_of(element_of(9)) == 9 && slot_of(element_of(17)) == 17);

bool instructions_present() {
#if OMNIRT_HAVE_PACKED_KERNEL
    static const bool present =
        small_batch_linear_supported(at::kBFloat16) && __builtin_cpu_supports("avx512vl");
    return present;
#else
    return false;
#endif
}

#if OMNIRT_HAVE_PACKED_KERNEL

// The 32 bfloat16 weights of a block, back in element order. With Escapes, code-15 slots take
// their high bytes from *escape (advanced past them).
template <bool Escapes>
OMNIRT_TARGET_PACKED [[gnu::always_inline]] inline __m512i decode(const std::uint8_t* block,
                                                                  __m256i table,
                                                                  const std::uint8_t*& escape) {
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block));
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 32));
    const __m128i nibble = _mm_set1_epi8(0x0F);
    const __m256i codes =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(packed, nibble)),
                                _mm_and_si128(_mm_srli_epi16(packed, 4), nibble), 1);
    __m256i high = _mm256_shuffle_epi8(table, codes);
    if constexpr (Escapes) {
        auto marked = static_cast<std::uint32_t>(
            _mm256_cmpeq_epi8_mask(codes, _mm256_set1_epi8(PackedWeight::kEscapeCode)));
        if (marked != 0) {
            alignas(32) std::uint8_t bytes[32];
            _mm256_store_si256(reinterpret_cast<__m256i*>(bytes), high);
            for (; marked != 0; marked &= marked - 1) bytes[__builtin_ctz(marked)] = *escape++;
            high = _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes));
        }
    }
    // Per 128-bit lane, bytes 0-7 of low / high interleave to elements 0-7 (lane 0) and 8-15
    // (lane 1), bytes 8-15 to elements 16-23 and 24-31.
    const __m256i first = _mm256_unpacklo_epi8(low, high);
    const __m256i second = _mm256_unpackhi_epi8(low, high);
    return _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
}

// acc[m] = the products of weight row `row` with the R input rows, one accumulator over steps of
// 32 (the bfloat16 streaming kernel's order).
template <int R, bool Escapes>
OMNIRT_TARGET_PACKED [[gnu::always_inline]] inline void row_sums(
    __m512 (&acc)[R], const std::uint16_t* x, std::int64_t x_stride, const std::uint8_t* row,
    std::int64_t in, __m256i table, const std::uint8_t* escape) {
#pragma GCC unroll 4
    for (int m = 0; m < R; ++m) acc[m] = _mm512_setzero_ps();
    const std::uint8_t* block = row;
    for (std::int64_t k = 0; k < in; k += kB, block += PackedWeight::kBlockBytes) {
        _mm_prefetch(reinterpret_cast<const char*>(block) + kPrefetchBytes, _MM_HINT_T0);
        const auto weights = (__m512bh)decode<Escapes>(block, table, escape);
#pragma GCC unroll 4
        for (int m = 0; m < R; ++m) {
            acc[m] = _mm512_dpbf16_ps(acc[m], (__m512bh)_mm512_loadu_si512(x + m * x_stride + k),
                                      weights);
        }
    }
}

// The float32 counterpart: each block's 32 weights widened in two halves of 16, one FMA
// accumulator per input row over steps of 16 (the float32 streaming kernel's order).
template <int R, bool Escapes>
OMNIRT_TARGET_PACKED [[gnu::always_inline]] inline void row_sums(__m512 (&acc)[R], const float* x,
                                                                 std::int64_t x_stride,
                                                                 const std::uint8_t* row,
                                                                 std::int64_t in, __m256i table,
                                                                 const std::uint8_t* escape) {
#pragma GCC unroll 8
    for (int m = 0; m < R; ++m) acc[m] = _mm512_setzero_ps();
    const std::uint8_t* block = row;
    for (std::int64_t k = 0; k < in; k += kB, block += PackedWeight::kBlockBytes) {
        _mm_prefetch(reinterpret_cast<const char*>(block) + kPrefetchBytes, _MM_HINT_T0);
        const __m512i weights = decode<Escapes>(block, table, escape);
        const __m512 first = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(weights)), 16));
        const __m512 second = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(weights, 1)), 16));
#pragma GCC unroll 8
        for (int m = 0; m < R; ++m) {
            acc[m] = _mm512_fmadd_ps(_mm512_loadu_ps(x + m * x_stride + k), first, acc[m]);
        }
#pragma GCC unroll 8
        for (int m = 0; m < R; ++m) {
            acc[m] = _mm512_fmadd_ps(_mm512_loadu_ps(x + m * x_stride + k + 16), second, acc[m]);
        }
    }
}

template <class T, int R>
OMNIRT_TARGET_PACKED void rows_stream(const T* x, std::int64_t x_stride, const PackedWeight& weight,
                                      std::int64_t n_begin, std::int64_t n_end, float* y,
                                      std::int64_t y_stride) {
    constexpr int kGroup = detail::kGroupSums;
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(weight.table().data())));
    const std::int64_t in = weight.in();
    for (std::int64_t n = n_begin; n < n_end; n += kGroup) {
        const auto count = static_cast<int>(std::min<std::int64_t>(kGroup, n_end - n));
        __m512 sums[R][kGroup];
        for (int r = 0; r < count; ++r) {
            const std::uint32_t first = weight.escape_begin(n + r);
            const std::uint8_t* escape = weight.escapes() + first;
            __m512 acc[R];
            if (weight.escape_begin(n + r + 1) == first) {
                row_sums<R, false>(acc, x, x_stride, weight.row(n + r), in, table, escape);
            } else {
                row_sums<R, true>(acc, x, x_stride, weight.row(n + r), in, table, escape);
            }
#pragma GCC unroll 8
            for (int m = 0; m < R; ++m) sums[m][r] = acc[m];
        }
        detail::store_group_sums<R>(sums, count, y + n, y_stride);
    }
}

// rows_stream<T, rows> for rows in 1..Max.
template <class T, int Max, int R = 1>
void dispatch(int rows, const T* x, std::int64_t x_stride, const PackedWeight& weight,
              std::int64_t n_begin, std::int64_t n_end, float* y, std::int64_t y_stride) {
    if (rows == R) return rows_stream<T, R>(x, x_stride, weight, n_begin, n_end, y, y_stride);
    if constexpr (R < Max) {
        dispatch<T, Max, R + 1>(rows, x, x_stride, weight, n_begin, n_end, y, y_stride);
    }
}

#endif  // OMNIRT_HAVE_PACKED_KERNEL

// The 15 most frequent high bytes of w (ties: the smaller byte first), and how many weights
// they miss.
std::pair<std::array<std::uint8_t, 16>, std::int64_t> choose_table(const std::uint16_t* w,
                                                                   std::int64_t count) {
    std::array<std::int64_t, 256> counts{};
    std::mutex merge;
    at::parallel_for(0, count, std::int64_t{1} << 20, [&](std::int64_t begin, std::int64_t end) {
        std::array<std::int64_t, 256> local{};
        for (std::int64_t i = begin; i < end; ++i) ++local[w[i] >> 8];
        const std::lock_guard<std::mutex> lock(merge);
        for (std::size_t b = 0; b < 256; ++b) counts[b] += local[b];
    });
    std::array<int, 256> order{};
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return counts[static_cast<std::size_t>(a)] > counts[static_cast<std::size_t>(b)];
    });
    std::array<std::uint8_t, 16> table{};
    std::int64_t covered = 0;
    for (std::size_t i = 0; i < PackedWeight::kEscapeCode; ++i) {
        table[i] = static_cast<std::uint8_t>(order[i]);
        covered += counts[static_cast<std::size_t>(order[i])];
    }
    return {table, count - covered};
}

// bfloat16 bits as the float32 values they are (exact, NaN payloads kept).
at::Tensor widen(const at::Tensor& bfloat16) {
    at::Tensor wide = at::empty(bfloat16.sizes(), at::TensorOptions().dtype(at::kFloat));
    const auto* from = reinterpret_cast<const std::uint16_t*>(bfloat16.data_ptr());
    auto* to = reinterpret_cast<std::uint32_t*>(wide.data_ptr());
    for (std::int64_t i = 0; i < bfloat16.numel(); ++i) to[i] = std::uint32_t{from[i]} << 16;
    return wide;
}

}  // namespace

bool packing_enabled() {
    static const bool on = [] {
        const char* setting = std::getenv("OMNIRT_CPU_PACK");
        return setting == nullptr || std::string_view(setting) != "0";
    }();
    return on;
}

std::int64_t PackedWeight::bytes() const {
    return static_cast<std::int64_t>(blocks_.size() + escapes_.size() +
                                     escape_begin_.size() * sizeof(std::uint32_t));
}

std::shared_ptr<const PackedWeight> PackedWeight::pack(const at::Tensor& weight) {
    if (!packing_enabled() || !instructions_present() || !weight.defined() || weight.dim() != 2 ||
        !weight.device().is_cpu() ||
        (weight.scalar_type() != at::kBFloat16 && weight.scalar_type() != at::kFloat) ||
        weight.size(0) < 1 || weight.size(1) < 1 || weight.size(1) % kB != 0) {
        return nullptr;
    }
    const at::Tensor source = weight.contiguous();
    const std::int64_t out = source.size(0);
    const std::int64_t in = source.size(1);
    // The bfloat16 bits: the weight's own, or a float32 weight's upper halves where every lower
    // half is zero (a bfloat16 checkpoint loaded as float32).
    at::Tensor halves = source;
    if (source.scalar_type() == at::kFloat) {
        halves = at::empty({out, in}, at::TensorOptions().dtype(at::kShort));
        const auto* bits = reinterpret_cast<const std::uint32_t*>(source.data_ptr());
        auto* high = reinterpret_cast<std::uint16_t*>(halves.data_ptr());
        std::atomic<bool> exact{true};
        at::parallel_for(0, out * in, std::int64_t{1} << 20,
                         [&](std::int64_t begin, std::int64_t end) {
                             std::uint32_t low = 0;
                             for (std::int64_t i = begin; i < end; ++i) {
                                 low |= bits[i] & 0xFFFFu;
                                 high[i] = static_cast<std::uint16_t>(bits[i] >> 16);
                             }
                             if (low != 0) exact = false;
                         });
        if (!exact) return nullptr;
    }
    const auto* w = reinterpret_cast<const std::uint16_t*>(halves.data_ptr());
    const auto [table, escaping] = choose_table(w, out * in);
    if (escaping * kMaxEscapeShare > out * in) return nullptr;

    std::array<std::uint8_t, 256> code_of{};
    code_of.fill(kEscapeCode);
    for (std::size_t i = 0; i < kEscapeCode; ++i) code_of[table[i]] = static_cast<std::uint8_t>(i);

    std::shared_ptr<PackedWeight> packed(new PackedWeight());
    packed->dtype_ = source.scalar_type();
    packed->out_ = out;
    packed->in_ = in;
    packed->table_ = table;
    packed->blocks_.resize(static_cast<std::size_t>(out * (in / kB) * kBlockBytes));
    packed->escape_begin_.assign(static_cast<std::size_t>(out + 1), 0);
    // Escapes per row, then their offsets.
    at::parallel_for(0, out, 256, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            std::uint32_t escapes = 0;
            for (std::int64_t k = 0; k < in; ++k)
                escapes += code_of[w[n * in + k] >> 8] == kEscapeCode;
            packed->escape_begin_[static_cast<std::size_t>(n + 1)] = escapes;
        }
    });
    std::partial_sum(packed->escape_begin_.begin(), packed->escape_begin_.end(),
                     packed->escape_begin_.begin());
    packed->escapes_.resize(packed->escape_begin_.back());
    at::parallel_for(0, out, 256, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            std::uint8_t* escape =
                packed->escapes_.data() + packed->escape_begin_[static_cast<std::size_t>(n)];
            std::uint8_t* block = packed->blocks_.data() + n * (in / kB) * kBlockBytes;
            for (std::int64_t k = 0; k < in; k += kB, block += kBlockBytes) {
                std::fill(block + kB, block + kBlockBytes, std::uint8_t{0});
                // Slot order: the escapes of a block in the order the kernel patches them.
                for (int s = 0; s < kB; ++s) {
                    const std::uint16_t value = w[n * in + k + element_of(s)];
                    const std::uint8_t high = static_cast<std::uint8_t>(value >> 8);
                    const std::uint8_t code = code_of[high];
                    block[s] = static_cast<std::uint8_t>(value & 0xFF);
                    const int lane_byte = s % 16;
                    block[kB + lane_byte] |= static_cast<std::uint8_t>(s < 16 ? code : code << 4);
                    if (code == kEscapeCode) *escape++ = high;
                }
            }
        }
    });
    return packed;
}

at::Tensor PackedWeight::unpack() const {
    at::Tensor weight = at::empty({out_, in_}, at::TensorOptions().dtype(at::kBFloat16));
    auto* w = reinterpret_cast<std::uint16_t*>(weight.data_ptr());
    const std::uint8_t* escape = escapes_.data();
    for (std::int64_t n = 0; n < out_; ++n) {
        const std::uint8_t* block = row(n);
        for (std::int64_t k = 0; k < in_; k += kB, block += kBlockBytes) {
            for (int s = 0; s < kB; ++s) {
                const int code = (block[kB + s % 16] >> (s < 16 ? 0 : 4)) & 0x0F;
                const std::uint8_t high =
                    code == kEscapeCode ? *escape++ : table_[static_cast<std::size_t>(code)];
                w[n * in_ + k + element_of(s)] = static_cast<std::uint16_t>((high << 8) | block[s]);
            }
        }
    }
    return dtype_ == at::kFloat ? widen(weight) : weight;
}

void packed_rows_stream(int rows, const std::uint16_t* x, std::int64_t x_stride,
                        const PackedWeight& weight, std::int64_t n_begin, std::int64_t n_end,
                        float* y, std::int64_t y_stride) {
#if OMNIRT_HAVE_PACKED_KERNEL
    dispatch<std::uint16_t, 4>(rows, x, x_stride, weight, n_begin, n_end, y, y_stride);
#else
    (void)rows, (void)x, (void)x_stride, (void)weight, (void)n_begin, (void)n_end, (void)y,
        (void)y_stride;
#endif
}

void packed_rows_stream_float(int rows, const float* x, std::int64_t x_stride,
                              const PackedWeight& weight, std::int64_t n_begin, std::int64_t n_end,
                              float* y, std::int64_t y_stride) {
#if OMNIRT_HAVE_PACKED_KERNEL
    dispatch<float, kPackedFloatRows>(rows, x, x_stride, weight, n_begin, n_end, y, y_stride);
#else
    (void)rows, (void)x, (void)x_stride, (void)weight, (void)n_begin, (void)n_end, (void)y,
        (void)y_stride;
#endif
}

}  // namespace omnirt::engine::cpu

#pragma once
// Portable SIMD helpers for the hand-written CPU kernels (paged attention, small-batch GEMV):
// GCC / Clang vector types that the compiler lowers to whatever the target has (two SSE
// registers on baseline x86-64, one AVX register where enabled, NEON pairs on ARM), and the
// dispatch macro that compiles a kernel twice on x86-64 GCC, for AVX2 + FMA (x86-64-v3, picked
// at load time where the CPU has it) and for the baseline. Helpers are force-inlined so that
// each clone gets its own code; Float8 values never cross a call that is not inlined.
//
// Include only from .cpp files of kernels (it turns off -Wpsabi for the including file).
#include <c10/util/BFloat16.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OMNIRT_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define OMNIRT_KERNEL_CLONES
#endif
#define OMNIRT_INLINE [[gnu::always_inline]] inline

namespace omnirt::engine::cpu {

using Float8 = float __attribute__((vector_size(32)));

OMNIRT_INLINE Float8 load8(const float* source) {
    Float8 v;
    std::memcpy(&v, source, sizeof v);
    return v;
}

OMNIRT_INLINE void store8(float* destination, Float8 v) { std::memcpy(destination, &v, sizeof v); }

// Eight bfloat16 values widened to float32 (a 16-bit shift).
OMNIRT_INLINE Float8 load8(const c10::BFloat16* source) {
    using UInt16x8 = std::uint16_t __attribute__((vector_size(16)));
    using UInt32x8 = std::uint32_t __attribute__((vector_size(32)));
    UInt16x8 bits;
    std::memcpy(&bits, source, sizeof bits);
    const UInt32x8 wide = __builtin_convertvector(bits, UInt32x8) << 16;
    Float8 v;
    std::memcpy(&v, &wide, sizeof v);
    return v;
}

OMNIRT_INLINE float horizontal_sum(Float8 v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

namespace detail {
using UInt32x8 = std::uint32_t __attribute__((vector_size(32)));

// The bfloat16 bits (low 16 bits of each lane) of eight float32 values rounded as
// c10::BFloat16 rounds: to nearest even, NaN to 0x7FC0.
OMNIRT_INLINE UInt32x8 bfloat16_bits(Float8 v) {
    using Int32x8 = std::int32_t __attribute__((vector_size(32)));
    UInt32x8 bits;
    std::memcpy(&bits, &v, sizeof bits);
    const UInt32x8 rounded = (bits + ((bits >> 16) & 1u) + 0x7FFFu) >> 16;
    const UInt32x8 nan = UInt32x8(Int32x8(v != v));  // all ones in NaN lanes
    return (rounded & ~nan) | (nan & 0x7FC0u);
}
}  // namespace detail

// Eight float32 values rounded to bfloat16 (detail::bfloat16_bits): the same bits as a
// static_cast per value.
OMNIRT_INLINE void store8(c10::BFloat16* destination, Float8 v) {
    using UInt16x8 = std::uint16_t __attribute__((vector_size(16)));
    const UInt16x8 narrow = __builtin_convertvector(detail::bfloat16_bits(v), UInt16x8);
    std::memcpy(destination, &narrow, sizeof narrow);
}

// v rounded through bfloat16 and widened back (what an operator producing bfloat16 leaves),
// in registers.
OMNIRT_INLINE Float8 round_through_bfloat16(Float8 v) {
    const detail::UInt32x8 widened = detail::bfloat16_bits(v) << 16;
    Float8 result;
    std::memcpy(&result, &widened, sizeof result);
    return result;
}

}  // namespace omnirt::engine::cpu

#include "checkpoint/convert.h"

#include <bit>
#include <cstring>

namespace omnirt::checkpoint {
namespace {

template <class T>
T load(const std::byte* p) {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return value;
}

template <class T>
void store(std::byte* p, T value) {
    std::memcpy(p, &value, sizeof(T));
}

float load_float(const std::byte* p, DType dtype) {
    switch (dtype) {
        case DType::f16:
            return f16_to_float(load<std::uint16_t>(p));
        case DType::bf16:
            return bf16_to_float(load<std::uint16_t>(p));
        default:
            return load<float>(p);
    }
}

void store_float(std::byte* p, DType dtype, float value) {
    switch (dtype) {
        case DType::f16:
            store(p, float_to_f16(value));
            break;
        case DType::bf16:
            store(p, float_to_bf16(value));
            break;
        default:
            store(p, value);
            break;
    }
}

}  // namespace

std::uint16_t float_to_bf16(float value) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
        // NaN: keep the sign and the top payload bits, force the quiet bit.
        return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
    }
    // Round to nearest even: add 0x7FFF plus the lowest kept bit, then truncate. Carries into the
    // exponent are correct (rounding up to the next binade, or to infinity).
    const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(std::uint16_t bits) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_f16(float value) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) {  // NaN: quiet, top payload bits kept
        return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x03FFu));
    }
    if (magnitude >= 0x477FF000u) {  // rounds to >= 65520: infinity (also +-inf itself)
        return static_cast<std::uint16_t>(sign | 0x7C00u);
    }
    const int exponent = static_cast<int>(magnitude >> 23) - 127;  // unbiased
    if (exponent >= -14) {
        // Normal half: rebias the exponent and round the 23-bit mantissa to 10 bits.
        std::uint32_t half =
            ((static_cast<std::uint32_t>(exponent + 15)) << 10) | ((magnitude >> 13) & 0x03FFu);
        const std::uint32_t rest = magnitude & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry: fine
        return static_cast<std::uint16_t>(sign | half);
    }
    if (exponent < -25) return sign;  // below half the smallest subnormal (2^-25): zero
    // Subnormal half: the value is m * 2^(exponent - 23) with m the 24-bit mantissa (implicit 1
    // included); in units of the smallest subnormal (2^-24) that is m >> (-exponent - 1).
    const std::uint32_t mantissa = (magnitude & 0x007FFFFFu) | 0x00800000u;
    const int total_shift = -exponent - 1;  // 14..24
    std::uint32_t half = mantissa >> total_shift;
    const std::uint32_t rest = mantissa & ((1u << total_shift) - 1u);
    const std::uint32_t halfway = 1u << (total_shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u)))
        ++half;  // may become the smallest normal
    return static_cast<std::uint16_t>(sign | half);
}

float f16_to_float(std::uint16_t bits) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    std::uint32_t mantissa = bits & 0x03FFu;
    if (exponent == 0x1F) {  // infinity or NaN (payload kept, so quiet NaNs stay quiet)
        return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
    }
    if (exponent != 0) {
        return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
    }
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: normalise.
    int shift = 0;
    while ((mantissa & 0x0400u) == 0) {
        mantissa <<= 1;
        ++shift;
    }
    mantissa &= 0x03FFu;
    return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(113 - shift) << 23) |
                                (mantissa << 13));
}

bool is_convertible_float(DType dtype) {
    return dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f32;
}

void convert_elements(const std::byte* source, DType from, std::byte* destination, DType to,
                      std::size_t count) {
    OMNI_CHECK(is_convertible_float(from) && is_convertible_float(to),
               "convert_elements: f16, bf16 and f32 only");
    if (from == to) {
        if (count > 0) std::memcpy(destination, source, count * element_size(from));
        return;
    }
    const std::size_t in_size = element_size(from);
    const std::size_t out_size = element_size(to);
    // The common load-time cases get loops the compiler can vectorise.
    if (from == DType::bf16 && to == DType::f32) {
        for (std::size_t i = 0; i < count; ++i) {
            store(destination + i * 4, bf16_to_float(load<std::uint16_t>(source + i * 2)));
        }
        return;
    }
    if (from == DType::f32 && to == DType::bf16) {
        for (std::size_t i = 0; i < count; ++i) {
            store(destination + i * 2, float_to_bf16(load<float>(source + i * 4)));
        }
        return;
    }
    for (std::size_t i = 0; i < count; ++i) {
        store_float(destination + i * out_size, to, load_float(source + i * in_size, from));
    }
}

Result<Tensor> convert_dtype(const Tensor& tensor, DType target) {
    if (!tensor.defined()) return fail(ErrorCode::invalid_argument, "convert: undefined tensor");
    if (!tensor.device().is_cpu()) {
        return fail(ErrorCode::unimplemented, "convert: only host tensors are converted");
    }
    if (tensor.dtype() == target) return tensor.clone();
    if (!is_convertible_float(tensor.dtype()) || !is_convertible_float(target)) {
        return fail(ErrorCode::unimplemented,
                    "conversion from " + std::string(to_string(tensor.dtype())) + " to " +
                        std::string(to_string(target)) +
                        " is not supported (float16, bfloat16 and float32 convert between each "
                        "other)");
    }
    OMNI_TRY(Tensor source, tensor.contiguous());
    OMNI_TRY(Tensor out, Tensor::empty(source.shape(), target));
    if (out.numel() > 0) {
        convert_elements(source.data(), source.dtype(), out.mutable_data(), target,
                         static_cast<std::size_t>(out.numel()));
    }
    return out;
}

}  // namespace omnirt::checkpoint

#pragma once
// Element types and devices of tensors. Names follow PyTorch ("float32", "cuda:1") so that
// metadata written by other runtimes reads the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace omnirt {

enum class DType : std::uint8_t { boolean, u8, i8, i16, i32, i64, f16, bf16, f32, f64 };
inline constexpr int kDTypeCount = 10;

[[nodiscard]] std::size_t element_size(DType dtype);
[[nodiscard]] std::string_view to_string(DType dtype);
[[nodiscard]] Result<DType> parse_dtype(std::string_view name);
// The wire code of a dtype (its enum value); decoding checks the range.
[[nodiscard]] Result<DType> dtype_from_code(std::int64_t code);

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<bool> {
    static constexpr DType value = DType::boolean;
};
template <>
struct DTypeOf<std::uint8_t> {
    static constexpr DType value = DType::u8;
};
template <>
struct DTypeOf<std::int8_t> {
    static constexpr DType value = DType::i8;
};
template <>
struct DTypeOf<std::int16_t> {
    static constexpr DType value = DType::i16;
};
template <>
struct DTypeOf<std::int32_t> {
    static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<std::int64_t> {
    static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<float> {
    static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
    static constexpr DType value = DType::f64;
};

enum class DeviceKind : std::uint8_t { cpu, cuda };

struct Device {
    DeviceKind kind = DeviceKind::cpu;
    int index = 0;  // GPU ordinal for cuda; always 0 for cpu

    static Device cpu() { return {}; }
    static Device cuda(int index) { return {DeviceKind::cuda, index}; }
    [[nodiscard]] bool is_cpu() const { return kind == DeviceKind::cpu; }
    // "cpu" or "cuda:N".
    [[nodiscard]] std::string to_string() const;
    friend bool operator==(const Device&, const Device&) = default;
};

// Accepts "cpu", "cuda" (ordinal 0) and "cuda:N".
[[nodiscard]] Result<Device> parse_device(std::string_view text);

}  // namespace omnirt

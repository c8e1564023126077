#pragma once
// Floating-point conversions between float32, bfloat16 and float16 on the host. Narrowing
// rounds to nearest, ties to even (as PyTorch's .to() does); overflow gives infinity; NaN stays a
// (quiet) NaN of the same sign; float16 subnormals are produced and read exactly. Widening is
// exact.
#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace omnirt::checkpoint {

[[nodiscard]] std::uint16_t float_to_bf16(float value);
[[nodiscard]] float bf16_to_float(std::uint16_t bits);
[[nodiscard]] std::uint16_t float_to_f16(float value);
[[nodiscard]] float f16_to_float(std::uint16_t bits);

// True for the dtypes convert_dtype() converts between: f16, bf16, f32.
[[nodiscard]] bool is_convertible_float(DType dtype);

// Converts `count` elements from `source` (dtype `from`) to `destination` (dtype `to`); both
// f16 / bf16 / f32 (OMNI_CHECK). Pointers need no alignment. Equal dtypes copy.
void convert_elements(const std::byte* source, DType from, std::byte* destination, DType to,
                      std::size_t count);

// A new writable contiguous host tensor holding `tensor` converted to `target`. Equal dtypes
// give a copy (any dtype); otherwise both must be f16 / bf16 / f32 (unimplemented otherwise).
[[nodiscard]] Result<Tensor> convert_dtype(const Tensor& tensor, DType target);

}  // namespace omnirt::checkpoint

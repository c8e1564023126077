#pragma once
// Internal to proto/: the bodies of the two tensor ext types (see proto/value_codec.h).
//   inline (type 2):      [u8 dtype code][u8 ndim][ndim x int64 LE dims][row-major elements]
//   placeholder (type 1): one msgpack unsigned integer (any width) spanning the whole body
#include <cstdint>
#include <span>

#include "core/error.h"
#include "core/tensor.h"

namespace omnirt::proto::detail {

struct InlineTensorLayout {
    DType dtype = DType::u8;
    Shape shape;
    std::size_t header_bytes = 0;  // elements start here
};

// Validates an inline tensor body: dtype code, at most kMaxTensorDims non-negative dims whose
// element count times the element size (overflow-checked) equals the bytes that follow, at most
// `max_tensor_bytes` of them, and bool elements that are 0 or 1. Messages carry no offset.
[[nodiscard]] Result<InlineTensorLayout> parse_inline_tensor(std::span<const std::uint8_t> body,
                                                             std::uint64_t max_tensor_bytes);

// checked_numel(shape), and also refuses shapes whose row-major strides overflow int64 (core's
// contiguous_strides counts a zero dimension as 1, so [2^62, 0, 4] has 0 elements but
// unrepresentable strides). Every shape read from the wire goes through this.
[[nodiscard]] Result<std::int64_t> checked_wire_numel(const Shape& shape);

// The index in a placeholder body; false when the body is not exactly one msgpack uint.
[[nodiscard]] bool parse_placeholder(std::span<const std::uint8_t> body, std::uint64_t& index);

}  // namespace omnirt::proto::detail

#include "proto/tensor_ext.h"

#include <limits>

namespace omnirt::proto::detail {

Result<std::int64_t> checked_wire_numel(const Shape& shape) {
    OMNI_TRY(std::int64_t numel, checked_numel(shape));
    std::int64_t span = 1;
    for (std::int64_t dim : shape) {
        const std::int64_t extent = dim > 0 ? dim : 1;
        if (span > std::numeric_limits<std::int64_t>::max() / extent) {
            return fail(ErrorCode::out_of_range, "tensor dimensions overflow int64 strides");
        }
        span *= extent;
    }
    return numel;
}

Result<InlineTensorLayout> parse_inline_tensor(std::span<const std::uint8_t> body,
                                               std::uint64_t max_tensor_bytes) {
    if (body.size() < 2)
        return fail(ErrorCode::invalid_argument, "inline tensor header is truncated");
    auto dtype = dtype_from_code(body[0]);
    if (!dtype.has_value()) return fail(dtype.error().with_context("inline tensor"));
    const std::size_t ndim = body[1];
    if (ndim > kMaxTensorDims) {
        return fail(ErrorCode::invalid_argument,
                    "inline tensor has " + std::to_string(ndim) + " dimensions; at most " +
                        std::to_string(kMaxTensorDims) + " are allowed");
    }
    InlineTensorLayout layout{.dtype = *dtype, .shape = Shape(ndim), .header_bytes = 2 + 8 * ndim};
    if (body.size() < layout.header_bytes) {
        return fail(ErrorCode::invalid_argument, "inline tensor shape is truncated");
    }
    for (std::size_t d = 0; d < ndim; ++d) {
        std::uint64_t bits = 0;
        for (int byte = 0; byte < 8; ++byte) {
            bits |= static_cast<std::uint64_t>(body[2 + 8 * d + byte]) << (8 * byte);
        }
        layout.shape[d] = static_cast<std::int64_t>(bits);
    }
    auto numel = checked_wire_numel(layout.shape);
    if (!numel.has_value()) return fail(numel.error().with_context("inline tensor"));
    const std::uint64_t element = element_size(*dtype);
    const std::uint64_t data_bytes = body.size() - layout.header_bytes;
    if (static_cast<std::uint64_t>(*numel) > data_bytes / element ||
        static_cast<std::uint64_t>(*numel) * element != data_bytes) {
        return fail(ErrorCode::invalid_argument, "inline tensor of " + std::to_string(*numel) +
                                                     " " + std::string(to_string(*dtype)) +
                                                     " elements carries " +
                                                     std::to_string(data_bytes) + " data bytes");
    }
    if (data_bytes > max_tensor_bytes) {
        return fail(ErrorCode::out_of_range, "tensor of " + std::to_string(data_bytes) +
                                                 " bytes exceeds the limit of " +
                                                 std::to_string(max_tensor_bytes));
    }
    if (*dtype == DType::boolean) {
        // Reading a bool that is neither 0 nor 1 is undefined behaviour in C++.
        for (std::size_t i = layout.header_bytes; i < body.size(); ++i) {
            if (body[i] > 1) {
                return fail(ErrorCode::invalid_argument,
                            "bool tensor holds the byte " + std::to_string(body[i]));
            }
        }
    }
    return layout;
}

bool parse_placeholder(std::span<const std::uint8_t> body, std::uint64_t& index) {
    if (body.size() == 1 && body[0] <= 0x7f) {
        index = body[0];
        return true;
    }
    if (body.empty() || body[0] < 0xcc || body[0] > 0xcf) return false;
    const std::size_t width = std::size_t{1} << (body[0] - 0xcc);
    if (body.size() != 1 + width) return false;
    index = 0;
    for (std::size_t i = 0; i < width; ++i) index = (index << 8) | body[1 + i];
    return true;
}

}  // namespace omnirt::proto::detail

#pragma once
// Limits that bound what a decoder accepts from untrusted bytes. Every decoder in proto/ checks
// them while it parses, before it allocates, so a malicious or corrupted input costs at most
// memory proportional to its own size and never a crash.
//
// Two presets: the default (DecodeLimits{}) for relay payload trees and stream blobs, whose
// tensors live in the flat buffer, and DecodeLimits::control() for control-plane messages, which
// are small except for the inline tensors of submit and complete messages. Adjust single fields
// with designated initializers: DecodeLimits{.max_depth = 16}.
#include <cstddef>
#include <cstdint>

namespace omnirt::proto {

struct DecodeLimits {
    // Open containers (lists and maps) at once; the envelope of a control message counts too.
    // Values above 1024 act as 1024 (decoding recurses once per level when it builds Values).
    std::uint32_t max_depth = 64;
    // Bytes of one string, map keys included.
    std::uint64_t max_string_bytes = std::uint64_t{64} << 20;
    // Bytes of one bytes value (msgpack bin), e.g. the payload tree inside a data_ready message.
    std::uint64_t max_bytes_bytes = std::uint64_t{1} << 30;
    // Declared elements of one list, or entries of one map.
    std::uint64_t max_container_elements = std::uint64_t{1} << 24;
    // Values of any kind in one document. Bounds the memory a decode can cost: a decoded value
    // takes about 100 bytes however few bytes encoded it.
    std::uint64_t max_total_elements = std::uint64_t{1} << 22;
    // Size of the whole encoded input.
    std::uint64_t max_total_bytes = std::uint64_t{2} << 30;
    // Tensors in one document (inline tensors, placeholders, or tensor_info entries).
    std::uint64_t max_tensors = 4096;
    // Element bytes of one tensor.
    std::uint64_t max_tensor_bytes = std::uint64_t{16} << 30;

    // Stricter limits for control-plane messages: shallow, at most 256 MiB in all (inline
    // tensors of submit/complete included), at most 2^20 values.
    [[nodiscard]] static constexpr DecodeLimits control() {
        return DecodeLimits{
            .max_depth = 32,
            .max_string_bytes = std::uint64_t{16} << 20,
            .max_bytes_bytes = std::uint64_t{64} << 20,
            .max_container_elements = std::uint64_t{1} << 20,
            .max_total_elements = std::uint64_t{1} << 20,
            .max_total_bytes = std::uint64_t{256} << 20,
            .max_tensors = 1024,
            .max_tensor_bytes = std::uint64_t{256} << 20,
        };
    }
};

}  // namespace omnirt::proto

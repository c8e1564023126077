#pragma once
// msgpack encoding of a Value tree.
//
// Kinds map to msgpack types as follows: null -> nil, bool -> bool, int -> int (smallest
// encoding), float -> float64 (float32 is accepted on decode), string -> str, bytes -> bin,
// list -> array, map -> map (string keys, written in key order, so encoding is deterministic).
// Decoding rejects non-string and duplicate map keys and unsigned integers above INT64_MAX.
//
// Tensors have two encodings, chosen by the caller:
//  * inline (control messages): msgpack ext type 2 holding
//      [u8 dtype code][u8 ndim][ndim x int64 little-endian dims][row-major element bytes];
//    decoded tensors get fresh kTensorAlignment-aligned storage.
//  * placeholder (relay payload trees): msgpack ext type 1 holding a msgpack uint, the index of
//    the tensor in a list the caller moves separately (see proto/payload_codec.h). The encoder
//    collects the tensors with their paths; the decoder leaves null at each placeholder and
//    reports the placeholders with their paths.
// A decoder accepts only the tensor encoding it was asked for.
//
// Decode errors say what was wrong and where: "map nested deeper than 64 levels at byte offset
// 64", "duplicate map key 'x' at byte offset 5". The offset points at a byte of the offending
// item (its first byte when its header is one byte). Codes: data_loss for bytes that are not one
// complete msgpack value (truncated, trailing bytes, reserved type byte), out_of_range for
// exceeded limits and integers outside int64, invalid_argument for valid msgpack that breaks
// the rules above (non-string or duplicate keys, malformed tensors, wrong ext types).
//
// Thread safety: all functions are pure; call them from any thread.
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "proto/limits.h"

namespace omnirt::proto {

inline constexpr std::int8_t kPlaceholderExtType = 1;
inline constexpr std::int8_t kInlineTensorExtType = 2;

// One step of a path into a Value tree: a map key or a list index.
using PathElement = std::variant<std::string, std::int64_t>;
// The position of a value inside a tree, from the root; empty for the root itself.
using TensorPath = std::vector<PathElement>;

// "data.frames[3]"-style rendering for error messages.
[[nodiscard]] std::string path_to_string(const TensorPath& path);

// A tensor the placeholder encoder took out of a tree; `index` is its placeholder value.
struct CollectedTensor {
    Tensor tensor;
    TensorPath path;
};

// A placeholder the decoder found; the decoded tree holds null at `path`.
struct TensorPlaceholder {
    std::uint64_t index = 0;
    TensorPath path;
    friend bool operator==(const TensorPlaceholder&, const TensorPlaceholder&) = default;
};

struct DecodedValue {
    Value value;
    std::vector<TensorPlaceholder> placeholders;  // in encounter (depth-first) order
};

// Appends the encoding of `value` with inline tensors to `out`. Fails for undefined or non-host
// tensors and for strings, bytes or tensors over 4 GiB (the msgpack limit); `out` then holds a
// partial encoding the caller must drop.
[[nodiscard]] Status encode_value(const Value& value, std::vector<std::uint8_t>& out);
[[nodiscard]] Result<std::vector<std::uint8_t>> encode_value(const Value& value);

// Appends the encoding of `value` with placeholder tensors to `out` and appends the tensors to
// `tensors` (placeholder i refers to tensors[i]; indices continue after existing entries). Any
// device is accepted: only the tree is written here.
[[nodiscard]] Status encode_value_with_placeholders(const Value& value,
                                                    std::vector<std::uint8_t>& out,
                                                    std::vector<CollectedTensor>& tensors);

// Decodes exactly one value that must span all of `bytes`; tensors must be inline.
[[nodiscard]] Result<Value> decode_value(std::span<const std::uint8_t> bytes,
                                         const DecodeLimits& limits = {});
// Decodes exactly one value that must span all of `bytes`; tensors must be placeholders.
// Indices are not checked against anything: binding them is the caller's job.
[[nodiscard]] Result<DecodedValue> decode_value_with_placeholders(
    std::span<const std::uint8_t> bytes, const DecodeLimits& limits = {});

}  // namespace omnirt::proto

#pragma once
// Base64 (RFC 4648, standard alphabet) for media payloads.
//
// base64_decode is strict: the length must be a multiple of 4, padding ('=') only at the end and
// only as much as needed, no whitespace, no URL-safe alphabet, and the unused bits of the last
// group must be zero (so every byte string has exactly one accepted encoding). The error names
// the byte offset of the first problem.
//
// Thread safety: pure functions.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace omnirt::serve::openai {

[[nodiscard]] std::string base64_encode(std::span<const std::uint8_t> bytes);
[[nodiscard]] Result<std::vector<std::uint8_t>> base64_decode(std::string_view text);
// The decoded size of a well-formed encoding of `text.size()` characters, without decoding.
[[nodiscard]] std::size_t base64_decoded_size_bound(std::size_t encoded_size);

}  // namespace omnirt::serve::openai

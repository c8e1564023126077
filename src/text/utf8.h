#pragma once
// UTF-8 helpers shared by the tokenizer, the decoders and the chat formatter. Pure functions.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace omnirt::text {

// The byte offset of the first byte that does not start or continue a well-formed UTF-8
// sequence (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), or nullopt when
// all of `bytes` is valid. A sequence cut short by the end of `bytes` is invalid.
[[nodiscard]] std::optional<std::size_t> find_invalid_utf8(std::string_view bytes);

// Appends `bytes` to `out`, replacing each maximal ill-formed subpart with U+FFFD (the WHATWG /
// Unicode "substitution of maximal subparts" rule that Python's errors="replace", Rust's
// from_utf8_lossy and JavaScript's TextDecoder all follow).
void append_utf8_lossy(std::string_view bytes, std::string& out);

// Like append_utf8_lossy, but stops before a trailing sequence that is incomplete yet still
// valid so far (it may complete when more bytes arrive). Returns the number of bytes consumed;
// bytes.size() - result bytes (at most 3) were held back.
std::size_t append_utf8_complete_prefix(std::string_view bytes, std::string& out);

// Appends the UTF-8 encoding of a Unicode scalar value (code_point <= 0x10FFFF, not a surrogate).
void append_code_point(char32_t code_point, std::string& out);

}  // namespace omnirt::text

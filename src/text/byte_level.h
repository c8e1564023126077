#pragma once
// GPT-2's byte-level alphabet: every byte 0..255 is spelled as one printable code point, so a
// vocabulary of strings can hold arbitrary bytes (space is U+0120 'Ġ', newline U+010A 'Ċ').
#include <cstdint>
#include <string>
#include <string_view>

namespace omnirt::text {

// The code point that spells `byte`.
[[nodiscard]] char32_t byte_to_code_point(std::uint8_t byte);

// Appends the byte-level spelling of `bytes` (each byte's code point, UTF-8 encoded).
void append_byte_level_spelling(std::string_view bytes, std::string& out);

// Appends the bytes a token spelling stands for and returns true when every character of
// `spelling` belongs to the alphabet; otherwise appends nothing and returns false (the caller
// then uses the spelling's own UTF-8 bytes, as Hugging Face's ByteLevel decoder does).
// `spelling` must be valid UTF-8.
[[nodiscard]] bool append_byte_level_bytes(std::string_view spelling, std::string& out);

}  // namespace omnirt::text

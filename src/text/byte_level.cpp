// The byte <-> code point tables of GPT-2's bytes_to_unicode().
#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace omnirt::text {
namespace {

struct Tables {
    std::array<char32_t, 256> byte_to_code_point{};
    std::array<std::int16_t, 324> code_point_to_byte{};  // every code point used is < 324
};

// Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') spell themselves; the other 68 bytes
// take 256, 257, ... in byte order.
Tables build_tables() {
    Tables tables;
    tables.code_point_to_byte.fill(-1);
    char32_t next_extra = 256;
    for (int byte = 0; byte < 256; ++byte) {
        const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                               (byte >= 0xAE && byte <= 0xFF);
        const char32_t code_point = printable ? static_cast<char32_t>(byte) : next_extra++;
        tables.byte_to_code_point[static_cast<std::size_t>(byte)] = code_point;
        tables.code_point_to_byte[code_point] = static_cast<std::int16_t>(byte);
    }
    return tables;
}

const Tables& tables() {
    static const Tables instance = build_tables();
    return instance;
}

}  // namespace

char32_t byte_to_code_point(std::uint8_t byte) { return tables().byte_to_code_point[byte]; }

void append_byte_level_spelling(std::string_view bytes, std::string& out) {
    const Tables& t = tables();
    for (char c : bytes) append_code_point(t.byte_to_code_point[static_cast<std::uint8_t>(c)], out);
}

bool append_byte_level_bytes(std::string_view spelling, std::string& out) {
    const Tables& t = tables();
    const std::size_t original_size = out.size();
    std::size_t i = 0;
    while (i < spelling.size()) {
        const auto lead = static_cast<std::uint8_t>(spelling[i]);
        char32_t code_point = 0;
        if (lead < 0x80) {
            code_point = lead;
            i += 1;
        } else if ((lead & 0xE0) == 0xC0 && i + 1 < spelling.size()) {
            code_point = static_cast<char32_t>(((lead & 0x1F) << 6) |
                                               (static_cast<std::uint8_t>(spelling[i + 1]) & 0x3F));
            i += 2;
        } else {  // three- and four-byte characters are never in the alphabet
            out.resize(original_size);
            return false;
        }
        if (code_point >= t.code_point_to_byte.size() || t.code_point_to_byte[code_point] < 0) {
            out.resize(original_size);
            return false;
        }
        out.push_back(static_cast<char>(t.code_point_to_byte[code_point]));
    }
    return true;
}

}  // namespace omnirt::text

#include "serve/openai/base64.h"

#include <array>

namespace omnirt::serve::openai {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::int8_t, 256> make_table() {
    std::array<std::int8_t, 256> table{};
    for (auto& entry : table) entry = -1;
    for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
        table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
    }
    return table;
}

constexpr std::array<std::int8_t, 256> kTable = make_table();

Error bad(std::size_t offset, std::string_view what) {
    return Error{ErrorCode::invalid_argument,
                 "invalid base64 at byte " + std::to_string(offset) + ": " + std::string(what)};
}

}  // namespace

std::string base64_encode(std::span<const std::uint8_t> bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t group =
            (std::uint32_t{bytes[i]} << 16) | (std::uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
        out.push_back(kAlphabet[(group >> 18) & 63]);
        out.push_back(kAlphabet[(group >> 12) & 63]);
        out.push_back(kAlphabet[(group >> 6) & 63]);
        out.push_back(kAlphabet[group & 63]);
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        std::uint32_t group = std::uint32_t{bytes[i]} << 16;
        if (rest == 2) group |= std::uint32_t{bytes[i + 1]} << 8;
        out.push_back(kAlphabet[(group >> 18) & 63]);
        out.push_back(kAlphabet[(group >> 12) & 63]);
        out.push_back(rest == 2 ? kAlphabet[(group >> 6) & 63] : '=');
        out.push_back('=');
    }
    return out;
}

std::size_t base64_decoded_size_bound(std::size_t encoded_size) { return encoded_size / 4 * 3; }

Result<std::vector<std::uint8_t>> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) {
        return fail(
            bad(text.size(), "length " + std::to_string(text.size()) + " is not a multiple of 4"));
    }
    std::vector<std::uint8_t> out;
    out.reserve(base64_decoded_size_bound(text.size()));
    for (std::size_t i = 0; i < text.size(); i += 4) {
        const bool last = i + 4 == text.size();
        std::uint32_t group = 0;
        int padding = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            const char c = text[i + j];
            if (c == '=') {
                // Padding only in the last group, in positions 2 and 3, and never followed by data.
                if (!last || j < 2) return fail(bad(i + j, "unexpected padding"));
                ++padding;
                group <<= 6;
                continue;
            }
            if (padding > 0) return fail(bad(i + j, "data after padding"));
            const std::int8_t v = kTable[static_cast<unsigned char>(c)];
            if (v < 0) return fail(bad(i + j, "character outside the base64 alphabet"));
            group = (group << 6) | static_cast<std::uint32_t>(v);
        }
        if (padding == 2 && (group & 0xFFFF) != 0) {
            return fail(bad(i + 1, "non-zero bits before padding"));
        }
        if (padding == 1 && (group & 0xFF) != 0) {
            return fail(bad(i + 2, "non-zero bits before padding"));
        }
        out.push_back(static_cast<std::uint8_t>(group >> 16));
        if (padding < 2) out.push_back(static_cast<std::uint8_t>(group >> 8));
        if (padding < 1) out.push_back(static_cast<std::uint8_t>(group));
    }
    return out;
}

}  // namespace omnirt::serve::openai

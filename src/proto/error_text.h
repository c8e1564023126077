#pragma once
// Internal to proto/: rendering untrusted text inside error messages.
#include <cstdio>
#include <string>
#include <string_view>

namespace omnirt::proto::detail {

// 'text' in single quotes with control bytes escaped and anything past 64 bytes elided, so an
// attacker-chosen key cannot flood a log line or inject line breaks.
inline std::string quote(std::string_view text) {
    constexpr std::size_t kShown = 64;
    std::string out = "'";
    for (std::size_t i = 0; i < text.size() && i < kShown; ++i) {
        auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x20 || byte == 0x7f || byte == '\'' || byte == '\\') {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
            out += escaped;
        } else {
            out += static_cast<char>(byte);
        }
    }
    if (text.size() > kShown) out += "...";
    out += '\'';
    return out;
}

}  // namespace omnirt::proto::detail

// UTF-8 validation and lossy decoding by Unicode Table 3-7 (well-formed byte sequences).
#include "text/utf8.h"

#include <cstdint>

namespace omnirt::text {
namespace {

enum class SequenceState : std::uint8_t { valid, invalid, incomplete };

struct Sequence {
    SequenceState state;
    std::size_t length;  // valid: the sequence; invalid: the maximal subpart (>= 1); incomplete:
                         // the bytes left
};

// Classifies the sequence starting at bytes[position].
Sequence next_sequence(std::string_view bytes, std::size_t position) {
    const auto lead = static_cast<std::uint8_t>(bytes[position]);
    if (lead < 0x80) return {SequenceState::valid, 1};
    std::size_t length = 0;
    std::uint8_t second_low = 0x80;
    std::uint8_t second_high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) second_low = 0xA0;
        if (lead == 0xED) second_high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) second_low = 0x90;
        if (lead == 0xF4) second_high = 0x8F;
    } else {
        return {SequenceState::invalid, 1};
    }
    for (std::size_t i = 1; i < length; ++i) {
        if (position + i >= bytes.size()) return {SequenceState::incomplete, i};
        const auto byte = static_cast<std::uint8_t>(bytes[position + i]);
        const std::uint8_t low = i == 1 ? second_low : 0x80;
        const std::uint8_t high = i == 1 ? second_high : 0xBF;
        if (byte < low || byte > high) return {SequenceState::invalid, i};
    }
    return {SequenceState::valid, length};
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Appends the ASCII run starting at `position` and returns where it ends.
std::size_t append_ascii_run(std::string_view bytes, std::size_t position, std::string& out) {
    std::size_t end = position;
    while (end < bytes.size() && static_cast<std::uint8_t>(bytes[end]) < 0x80) ++end;
    out.append(bytes.substr(position, end - position));
    return end;
}

}  // namespace

std::optional<std::size_t> find_invalid_utf8(std::string_view bytes) {
    std::size_t position = 0;
    while (position < bytes.size()) {
        if (static_cast<std::uint8_t>(bytes[position]) < 0x80) {
            ++position;
            continue;
        }
        const Sequence sequence = next_sequence(bytes, position);
        if (sequence.state != SequenceState::valid) return position;
        position += sequence.length;
    }
    return std::nullopt;
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
    std::size_t position = 0;
    while (position < bytes.size()) {
        position = append_ascii_run(bytes, position, out);
        if (position >= bytes.size()) break;
        const Sequence sequence = next_sequence(bytes, position);
        if (sequence.state == SequenceState::valid) {
            out.append(bytes.substr(position, sequence.length));
        } else {
            out.append(kReplacement);
        }
        position += sequence.length;
    }
}

std::size_t append_utf8_complete_prefix(std::string_view bytes, std::string& out) {
    std::size_t position = 0;
    while (position < bytes.size()) {
        position = append_ascii_run(bytes, position, out);
        if (position >= bytes.size()) break;
        const Sequence sequence = next_sequence(bytes, position);
        if (sequence.state == SequenceState::incomplete) return position;
        if (sequence.state == SequenceState::valid) {
            out.append(bytes.substr(position, sequence.length));
        } else {
            out.append(kReplacement);
        }
        position += sequence.length;
    }
    return position;
}

void append_code_point(char32_t code_point, std::string& out) {
    if (code_point < 0x80) {
        out.push_back(static_cast<char>(code_point));
    } else if (code_point < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
        out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else if (code_point < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
        out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
        out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
}

}  // namespace omnirt::text

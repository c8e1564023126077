#include "engine/incremental_text.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace omnirt::engine {
namespace {

enum class Scan : std::uint8_t { valid, invalid, truncated };

struct Character {
    std::size_t length;  // of the valid character, or of the maximal ill-formed subpart
    Scan scan;
};

// The character starting at bytes[i] (Unicode Table 3-7, well-formed UTF-8 byte sequences).
Character scan_character(std::string_view bytes, std::size_t i) {
    const auto lead = static_cast<std::uint8_t>(bytes[i]);
    if (lead < 0x80) return {1, Scan::valid};
    std::size_t continuation = 0;
    std::uint8_t low = 0x80;
    std::uint8_t high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        continuation = 1;
    } else if (lead == 0xE0) {
        continuation = 2;
        low = 0xA0;
    } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
        continuation = 2;
    } else if (lead == 0xED) {
        continuation = 2;
        high = 0x9F;
    } else if (lead == 0xF0) {
        continuation = 3;
        low = 0x90;
    } else if (lead >= 0xF1 && lead <= 0xF3) {
        continuation = 3;
    } else if (lead == 0xF4) {
        continuation = 3;
        high = 0x8F;
    } else {
        return {1, Scan::invalid};
    }
    std::size_t length = 1;
    for (std::size_t k = 0; k < continuation; ++k) {
        if (i + length >= bytes.size()) return {length, Scan::truncated};
        const auto byte = static_cast<std::uint8_t>(bytes[i + length]);
        const std::uint8_t min = k == 0 ? low : 0x80;
        const std::uint8_t max = k == 0 ? high : 0xBF;
        if (byte < min || byte > max) return {length, Scan::invalid};
        ++length;
    }
    return {length, Scan::valid};
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

std::string sanitize_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (std::size_t i = 0; i < bytes.size();) {
        const Character character = scan_character(bytes, i);
        if (character.scan == Scan::valid) {
            out.append(bytes.substr(i, character.length));
        } else {
            out.append(kReplacement);
        }
        i += character.length;
    }
    return out;
}

std::size_t incomplete_utf8_tail(std::string_view bytes) {
    const std::size_t first = bytes.size() > 3 ? bytes.size() - 3 : 0;
    for (std::size_t start = first; start < bytes.size(); ++start) {
        const Character character = scan_character(bytes, start);
        if (character.scan == Scan::truncated && start + character.length == bytes.size()) {
            return bytes.size() - start;
        }
    }
    return 0;
}

IncrementalText::IncrementalText(std::vector<std::string> stop_strings) {
    for (std::string& stop : stop_strings) {
        if (stop.empty()) continue;
        longest_stop_ = std::max(longest_stop_, stop.size());
        stop_strings_.push_back(std::move(stop));
    }
}

std::string IncrementalText::release(std::size_t end, bool final) {
    std::string_view piece = std::string_view(raw_).substr(released_raw_, end - released_raw_);
    std::string text = sanitize_utf8(piece);
    released_raw_ = end;
    if (final) finished_ = true;
    released_text_ += text;
    return text;
}

std::string IncrementalText::append(std::string_view token_bytes) {
    if (stopped_ || finished_ || token_bytes.empty()) return {};
    raw_.append(token_bytes);
    std::size_t hold = 0;
    if (!stop_strings_.empty()) {
        std::size_t earliest = std::string::npos;
        for (const std::string& stop : stop_strings_) {
            const std::size_t at = raw_.find(stop, searched_);
            if (at != std::string::npos) earliest = std::min(earliest, at);
        }
        if (earliest != std::string::npos) {
            raw_.resize(earliest);
            stopped_ = true;
            return release(raw_.size(), /*final=*/true);
        }
        // No match can start before this any more.
        if (raw_.size() + 1 > longest_stop_) {
            searched_ = std::max(searched_, raw_.size() + 1 - longest_stop_);
        }
        const std::string_view text(raw_);
        for (const std::string& stop : stop_strings_) {
            for (std::size_t length = std::min(stop.size() - 1, raw_.size()); length > hold;
                 --length) {
                if (text.ends_with(std::string_view(stop).substr(0, length))) {
                    hold = length;
                    break;
                }
            }
        }
    }
    hold = std::max(hold, incomplete_utf8_tail(std::string_view(raw_).substr(released_raw_)));
    const std::size_t end = std::max(released_raw_, raw_.size() - std::min(hold, raw_.size()));
    return release(end, /*final=*/false);
}

std::string IncrementalText::finish() {
    if (finished_) return {};
    return release(raw_.size(), /*final=*/true);
}

}  // namespace omnirt::engine

// The added-token trie and the split around matches.
#include "text/added_tokens.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>

namespace omnirt::text::detail {
namespace {

// The code point that ends at `end` (exclusive) in valid UTF-8.
UChar32 code_point_before(std::string_view text, std::size_t end) {
    std::size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    UChar32 c = 0;
    std::int32_t offset = static_cast<std::int32_t>(begin);
    U8_NEXT_UNSAFE(reinterpret_cast<const std::uint8_t*>(text.data()), offset, c);
    return c;
}

std::size_t previous_boundary(std::string_view text, std::size_t end) {
    std::size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    return begin;
}

UChar32 code_point_at(std::string_view text, std::size_t begin, std::size_t* length) {
    UChar32 c = 0;
    std::int32_t offset = static_cast<std::int32_t>(begin);
    U8_NEXT_UNSAFE(reinterpret_cast<const std::uint8_t*>(text.data()), offset, c);
    *length = static_cast<std::size_t>(offset) - begin;
    return c;
}

bool is_word_character(UChar32 c) {
    return c == '_' || u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
           (U_GET_GC_MASK(c) & U_GC_N_MASK) != 0;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedToken*>& tokens) {
    for (const AddedToken* token : tokens) {
        if (token->content.empty()) continue;
        std::int32_t node = 0;
        for (char c : token->content) {
            const auto byte = static_cast<unsigned char>(c);
            auto& children = nodes_[static_cast<std::size_t>(node)].children;
            const auto found = std::lower_bound(
                children.begin(), children.end(), byte,
                [](const auto& child, unsigned char value) { return child.first < value; });
            if (found != children.end() && found->first == byte) {
                node = found->second;
                continue;
            }
            const auto next = static_cast<std::int32_t>(nodes_.size());
            children.insert(found, {byte, next});
            nodes_.emplace_back();
            node = next;
        }
        nodes_[static_cast<std::size_t>(node)].token = token;
        first_bytes_[static_cast<unsigned char>(token->content[0])] = true;
    }
}

const AddedToken* AddedTokenMatcher::longest_at(std::string_view text, std::size_t position,
                                                bool match_special) const {
    const AddedToken* best = nullptr;
    std::int32_t node = 0;
    for (std::size_t i = position; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        const auto& children = nodes_[static_cast<std::size_t>(node)].children;
        const auto found = std::lower_bound(
            children.begin(), children.end(), byte,
            [](const auto& child, unsigned char value) { return child.first < value; });
        if (found == children.end() || found->first != byte) break;
        node = found->second;
        const AddedToken* token = nodes_[static_cast<std::size_t>(node)].token;
        if (token != nullptr && (match_special || !token->special)) best = token;
    }
    return best;
}

void AddedTokenMatcher::split(std::string_view text, bool match_special,
                              std::vector<Segment>& out) const {
    std::size_t text_start = 0;  // start of the pending plain text
    std::size_t position = 0;
    while (position < text.size()) {
        if (!first_bytes_[static_cast<unsigned char>(text[position])]) {
            ++position;
            continue;
        }
        const AddedToken* token = longest_at(text, position, match_special);
        if (token == nullptr) {
            ++position;
            continue;
        }
        std::size_t begin = position;
        std::size_t end = position + token->content.size();
        if (token->single_word) {
            std::size_t length = 0;
            const bool word_before = begin > 0 && is_word_character(code_point_before(text, begin));
            const bool word_after =
                end < text.size() && is_word_character(code_point_at(text, end, &length));
            if (word_before || word_after) {
                ++position;
                continue;
            }
        }
        if (token->lstrip) {
            while (begin > text_start && u_isUWhiteSpace(code_point_before(text, begin))) {
                begin = previous_boundary(text, begin);
            }
        }
        if (token->rstrip) {
            std::size_t length = 0;
            while (end < text.size() && u_isUWhiteSpace(code_point_at(text, end, &length))) {
                end += length;
            }
        }
        if (begin > text_start) out.push_back({text_start, begin, -1});
        out.push_back({begin, end, token->id});
        text_start = end;
        position = end;
    }
    if (text_start < text.size()) out.push_back({text_start, text.size(), -1});
}

}  // namespace omnirt::text::detail

#pragma once
// Private to omnirt_text: added tokens (tokenizer.json "added_tokens") and the matcher that
// splits text around them before normalization and pre-tokenization, as Hugging Face's
// AddedVocabulary does: leftmost-longest match; lstrip / rstrip take the Unicode whitespace
// next to a match into it; single_word matches only between non-word characters.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace omnirt::text::detail {

struct AddedToken {
    TokenId id = 0;
    std::string content;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = false;  // matched in the normalized text rather than the raw text
    bool special = false;
};

// A piece of the text: plain text [begin, end) when token < 0, else an added token whose match
// (with stripped whitespace) covers [begin, end).
struct Segment {
    std::size_t begin = 0;
    std::size_t end = 0;
    TokenId token = -1;
};

class AddedTokenMatcher {
  public:
    AddedTokenMatcher() = default;
    // `tokens` must outlive the matcher.
    explicit AddedTokenMatcher(const std::vector<const AddedToken*>& tokens);

    [[nodiscard]] bool empty() const { return nodes_.size() <= 1; }
    // Appends the segments of `text` (valid UTF-8); they cover it in order. With
    // `match_special` false, tokens flagged special are not matched.
    void split(std::string_view text, bool match_special, std::vector<Segment>& out) const;

  private:
    struct Node {
        std::vector<std::pair<unsigned char, std::int32_t>> children;  // sorted by byte
        const AddedToken* token = nullptr;
    };
    // The longest token (enabled by `match_special`) that starts at `position`, or null.
    [[nodiscard]] const AddedToken* longest_at(std::string_view text, std::size_t position,
                                               bool match_special) const;

    std::vector<Node> nodes_{1};
    std::array<bool, 256> first_bytes_{};
};

}  // namespace omnirt::text::detail

#pragma once
// IncrementalText: the text side of one generating request. Token bytes come in one token at a
// time; what goes out is the text that is safe to show the client:
//  * never half a UTF-8 character: an incomplete character at the end is held back until its
//    last byte arrives (bytes that can never form a character become U+FFFD);
//  * never the start of a stop string: a tail of the text that could be the beginning of a stop
//    string is held back until the next bytes decide, so a stop string split across tokens is
//    never shown, not even in part;
//  * when a stop string appears, the text ends right before it (the stop string itself is not
//    part of the output, as in the OpenAI API) and stopped() turns true.
// The concatenation of everything returned equals text() once finish() was called.
//
// Thread safety: none (one request, the engine thread).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace omnirt::engine {

class IncrementalText {
  public:
    explicit IncrementalText(std::vector<std::string> stop_strings = {});

    // Appends the bytes of one token; returns the newly releasable text (possibly empty).
    // Nothing may be appended once stopped().
    [[nodiscard]] std::string append(std::string_view token_bytes);
    // The end of the stream: returns what was held back (an incomplete final character becomes
    // U+FFFD). Idempotent.
    [[nodiscard]] std::string finish();

    [[nodiscard]] bool stopped() const { return stopped_; }
    // Everything released so far.
    [[nodiscard]] const std::string& text() const { return released_text_; }

  private:
    // Releases raw_[released_raw_, end) (sanitized) and returns it.
    std::string release(std::size_t end, bool final);

    std::vector<std::string> stop_strings_;
    std::size_t longest_stop_ = 0;
    std::string raw_;               // every byte so far (cut at a stop string)
    std::size_t released_raw_ = 0;  // bytes of raw_ already released
    std::size_t searched_ = 0;      // raw_ bytes before this cannot start a stop string match
    std::string released_text_;
    bool stopped_ = false;
    bool finished_ = false;
};

// Valid UTF-8 of `bytes`, each maximal ill-formed subsequence replaced by U+FFFD (the
// Unicode "substitution of maximal subparts" practice, as tokenizers decode).
[[nodiscard]] std::string sanitize_utf8(std::string_view bytes);
// Bytes at the end of `bytes` that begin a UTF-8 character whose remaining bytes have not
// arrived yet (0 to 3).
[[nodiscard]] std::size_t incomplete_utf8_tail(std::string_view bytes);

}  // namespace omnirt::engine

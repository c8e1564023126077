#pragma once
// Streaming detokenization: ids go in one at a time, text comes out as soon as it is complete
// UTF-8. A character whose bytes are split across tokens (byte-level BPE does this for emoji,
// CJK and other multi-byte characters) is held back until its last byte arrives.
//
// Contract: the concatenation of every push() result and the final flush() equals
// Tokenizer::decode() of all the ids pushed (with the same options), U+FFFD included.
// Not thread-safe: one decoder per stream, used by one thread at a time.
#include <memory>
#include <string>

#include "core/error.h"
#include "text/tokenizer.h"

namespace omnirt::text {

class IncrementalDecoder {
  public:
    explicit IncrementalDecoder(std::shared_ptr<const Tokenizer> tokenizer,
                                DecodeOptions options = {});

    // Adds one id and returns the text that became complete (possibly empty). An id that names
    // no token fails with out_of_range and leaves the decoder as it was.
    [[nodiscard]] Result<std::string> push(TokenId id);
    // Returns what is still held back (an incomplete character becomes U+FFFD) and resets the
    // decoder for a new stream.
    [[nodiscard]] std::string flush();

    // Bytes held back waiting for the rest of a character (0..3).
    [[nodiscard]] std::size_t pending_bytes() const { return pending_.size(); }

  private:
    std::shared_ptr<const Tokenizer> tokenizer_;
    DecodeOptions options_;
    std::string pending_;
};

}  // namespace omnirt::text

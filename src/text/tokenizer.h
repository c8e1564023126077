#pragma once
// A Hugging Face tokenizer.json byte-level BPE tokenizer (the Qwen2 / Qwen3 / GPT-2 family),
// compatible with the `tokenizers` library for the features it supports (docs/text.md):
//   added tokens -> normalizer -> pre-tokenizer (Split regex, ByteLevel) -> BPE -> post-processor
// Thread safety: a Tokenizer is immutable after creation except for an internal, locked cache of
// merged words; every method may be called from any number of threads at once. Share it as
// std::shared_ptr<const Tokenizer>.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace omnirt::text {

using TokenId = std::int32_t;

// Limits on what a tokenizer.json may declare, so that a hostile file fails cleanly instead of
// exhausting memory. Real tokenizers are far below them (Qwen3: 151,669 ids, 151,387 merges).
inline constexpr std::size_t kMaxTokenizerJsonBytes = std::size_t{512} << 20;
inline constexpr int kMaxJsonDepth = 64;
inline constexpr TokenId kMaxTokenId = (TokenId{1} << 24) - 1;
inline constexpr std::size_t kMaxMerges = std::size_t{1} << 24;

struct EncodeOptions {
    // Apply the post-processor's template (e.g. a BOS token). Qwen's post-processor is
    // ByteLevel, which adds nothing.
    bool add_special_tokens = true;
    // Added tokens whose `special` flag is set are matched in the text (true) or encoded as
    // ordinary text (false; the `split_special_tokens` of Hugging Face, for untrusted text that
    // must not be able to inject control tokens). Non-special added tokens always match.
    bool match_special_tokens = true;
};

struct DecodeOptions {
    // Leave out ids of added tokens flagged `special` (<|im_end|>, <|image_pad|>, ...).
    bool skip_special_tokens = false;
};

class Tokenizer {
  public:
    // Reads and parses a tokenizer.json. Errors: not_found / unavailable (file), invalid_argument
    // (malformed JSON, a field of the wrong type or value, a bad regex; the message names the
    // field, e.g. "model.merges[12]"), unimplemented (a component this class does not support,
    // e.g. model.type "Unigram"), resource_exhausted (a limit above).
    [[nodiscard]] static Result<std::unique_ptr<Tokenizer>> from_file(const std::string& path);
    [[nodiscard]] static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view json_text);

    ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // Encodes UTF-8 text. Text that is not valid UTF-8 fails with invalid_argument naming the
    // byte offset (nothing is guessed or replaced; the caller decides how to repair its input).
    [[nodiscard]] Result<std::vector<TokenId>> encode(std::string_view text,
                                                      bool add_special_tokens = true) const;
    [[nodiscard]] Result<std::vector<TokenId>> encode(std::string_view text,
                                                      const EncodeOptions& options) const;

    // Decodes ids to UTF-8 text. Byte sequences that are not valid UTF-8 (a multi-byte character
    // cut between tokens at the end, or ids in an order no encoder produces) become U+FFFD, one
    // per maximal ill-formed subpart. An id that names no token fails with out_of_range.
    [[nodiscard]] Result<std::string> decode(std::span<const TokenId> ids,
                                             const DecodeOptions& options = {}) const;

    // Appends the raw bytes of one token (the vocabulary spelling mapped back through the
    // byte-level alphabet; an added token's content as it is). out_of_range for unknown ids.
    // The building block of IncrementalDecoder.
    [[nodiscard]] Status append_token_bytes(TokenId id, std::string& out) const;

    // The vocabulary spelling of an id (byte-level form, e.g. "Ġhello"), or nullopt.
    [[nodiscard]] std::optional<std::string_view> id_to_token(TokenId id) const;
    // The id of a vocabulary spelling or added-token content, or nullopt.
    [[nodiscard]] std::optional<TokenId> token_to_id(std::string_view token) const;
    // Whether `id` is an added token flagged `special`.
    [[nodiscard]] bool is_special(TokenId id) const;
    // One past the largest id (model vocabulary and added tokens): 151,669 for Qwen3. Ids below
    // it may still be unassigned (id_to_token returns nullopt for them).
    [[nodiscard]] std::size_t vocab_size() const;

  private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace omnirt::text

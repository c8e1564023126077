#pragma once
// Private to omnirt_text: the byte-level BPE model (vocabulary, ranked merges) and the merge of
// one pre-tokenized word, cached per word.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/word_cache.h"

namespace omnirt::text::detail {

struct BpeConfig {
    std::vector<std::pair<std::string, TokenId>> vocab;       // byte-level spelling -> id
    std::vector<std::pair<std::string, std::string>> merges;  // by rank, best first
    bool ignore_merges = false;  // a word that is itself in the vocabulary is one token
    std::size_t cache_capacity = 65536;
};

class BpeModel {
  public:
    // Errors name the field: "model.vocab" (duplicate id, id out of range, a byte of the
    // byte-level alphabet missing), "model.merges[i]" (a part or the merged token not in the
    // vocabulary).
    [[nodiscard]] static Result<std::unique_ptr<BpeModel>> create(BpeConfig config);
    ~BpeModel();

    // Appends the ids of one word (raw bytes, non-empty). Safe from any thread.
    void encode_word(std::string_view word, std::vector<TokenId>& out) const;

    [[nodiscard]] std::optional<TokenId> find(std::string_view spelling) const;
    [[nodiscard]] const std::unordered_map<std::string, TokenId>& vocab() const { return vocab_; }

  private:
    struct MergeEntry {
        std::uint64_t pair = 0;
        std::int32_t rank = -1;  // -1: empty slot
        TokenId merged = 0;
    };
    struct MergeResult {
        std::int32_t rank;
        TokenId merged;
    };

    BpeModel() = default;
    [[nodiscard]] std::optional<MergeResult> find_merge(TokenId left, TokenId right) const;
    void insert_merge(TokenId left, TokenId right, std::int32_t rank, TokenId merged);
    void merge_word(std::string_view word, std::vector<TokenId>& out) const;

    std::unordered_map<std::string, TokenId> vocab_;
    std::unordered_map<std::string, TokenId> vocab_by_bytes_;  // only with ignore_merges
    std::array<TokenId, 256> byte_ids_{};
    std::vector<MergeEntry> merge_table_;  // open addressing, size a power of two
    std::uint64_t merge_mask_ = 0;
    bool ignore_merges_ = false;
    std::unique_ptr<WordCache> cache_;
};

}  // namespace omnirt::text::detail

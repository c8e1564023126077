#pragma once
// Private to omnirt_text: a bounded, thread-safe LRU cache from a pre-tokenized word (its bytes)
// to its BPE ids. Sharded by hash so that threads encoding at once rarely share a lock.
#include <array>
#include <cstddef>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace omnirt::text::detail {

class WordCache {
  public:
    // Holds at most `capacity` words in total (0 disables the cache).
    explicit WordCache(std::size_t capacity);

    // Appends the cached ids of `word` to `out` and returns true, or returns false.
    bool lookup(std::string_view word, std::vector<TokenId>& out) const;
    // Stores the ids of `word`, evicting the least recently used word of its shard when full.
    void insert(std::string_view word, std::span<const TokenId> ids) const;

  private:
    static constexpr std::size_t kShards = 16;
    struct Entry {
        std::string word;
        std::vector<TokenId> ids;
    };
    struct Shard {
        std::mutex mutex;
        std::list<Entry> entries;  // most recently used first
        std::unordered_map<std::string_view, std::list<Entry>::iterator> index;  // views of
                                                                                 // entries
    };
    Shard& shard_for(std::size_t hash) const { return shards_[hash % kShards]; }

    std::size_t shard_capacity_;
    mutable std::array<Shard, kShards> shards_;
};

}  // namespace omnirt::text::detail

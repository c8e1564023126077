#pragma once
// RadixCache: the prefix cache of the AR engine. A tree over token ids at block granularity:
// every node below a root stands for one full KV block (block_size token ids) and names the
// block that holds the keys and values of those positions, given the path above it. Requests
// that start with the same tokens share those blocks instead of computing them again (the
// RadixAttention idea of SGLang, with edges of exactly one block).
//
// Positions are keyed by a 64-bit PositionKey: the token id for a plain token, or a hash of the
// token with whatever else determined its KV (injected media embeddings, explicit positions;
// ar_content.cpp), so requests with the same placeholder ids but other media never share blocks.
// The int32 overloads key positions by their token ids alone.
//
// Roots are per `salt`: requests whose KV differs for reasons the keys do not cover (another
// adapter, a user's isolation) use a salt that names it.
//
// Ownership: the cache holds one allocator reference per node; match() takes one more for the
// caller. A node is evictable when it is a leaf and the cache's reference is the only one.
// Invariant kept by the callers (ar_scheduler.cpp): a sequence that holds a cached block holds
// every block on the path above it (match() and insert() hand out whole paths), so referenced
// nodes never sit below unreferenced ones and every unreferenced node becomes evictable once
// its children are gone.
//
// Thread safety: none; the engine thread owns the cache.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/block_allocator.h"

namespace omnirt::engine {

using PositionKey = std::uint64_t;

struct RadixCacheCounters {
    std::uint64_t match_calls = 0;
    std::uint64_t matched_blocks = 0;       // blocks handed out by match()
    std::uint64_t inserted_blocks = 0;      // nodes created by insert()
    std::uint64_t deduplicated_blocks = 0;  // insert() calls that found the block cached already
    std::uint64_t evicted_blocks = 0;
};

class RadixCache {
  public:
    // `allocator` must outlive the cache. block_size must be positive.
    RadixCache(BlockAllocator& allocator, std::int32_t block_size);
    RadixCache(const RadixCache&) = delete;
    RadixCache& operator=(const RadixCache&) = delete;
    ~RadixCache();  // clear()

    // The blocks of the longest cached prefix of `tokens` made of whole blocks (at most
    // tokens.size() / block_size blocks), in position order. Each comes with a reference the
    // caller now owns (release it through the allocator). Marks the path as recently used.
    [[nodiscard]] std::vector<BlockId> match(const std::string& salt,
                                             std::span<const PositionKey> tokens);
    [[nodiscard]] std::vector<BlockId> match(const std::string& salt,
                                             std::span<const std::int32_t> tokens);

    // Caches the first blocks.size() blocks of a sequence: `tokens` holds at least
    // blocks.size() * block_size ids, and blocks[i] holds the KV of positions [i * block_size,
    // (i + 1) * block_size). Positions already cached keep their block: the caller's duplicate
    // is released and replaced in `blocks` by the cached one (with a reference for the caller),
    // so a caller's block table always agrees with the tree. Returns the number of new nodes.
    std::size_t insert(const std::string& salt, std::span<const PositionKey> tokens,
                       std::span<BlockId> blocks);
    std::size_t insert(const std::string& salt, std::span<const std::int32_t> tokens,
                       std::span<BlockId> blocks);

    // Frees up to `count` blocks by evicting unreferenced leaves, least recently used first
    // (a parent whose last child left becomes a candidate). Returns how many it freed.
    std::size_t evict(std::size_t count);
    // Drops every node (releases the cache's references; blocks still held by sequences stay
    // allocated to them).
    void clear();

    [[nodiscard]] std::size_t cached_blocks() const { return node_count_; }
    // Nodes referenced by the cache only (what evict() could free, given enough calls). O(n).
    [[nodiscard]] std::size_t evictable_blocks() const;
    [[nodiscard]] const RadixCacheCounters& counters() const { return counters_; }
    [[nodiscard]] std::int32_t block_size() const { return block_size_; }

  private:
    struct Node;
    using Key = std::vector<PositionKey>;

    Node& root(const std::string& salt);
    // Removes a leaf and releases its block. Returns its parent when that became a leaf (roots
    // excluded), else null.
    Node* remove_leaf(Node& node);

    BlockAllocator& allocator_;
    std::int32_t block_size_;
    std::map<std::string, std::unique_ptr<Node>, std::less<>> roots_;
    std::unordered_set<Node*> leaves_;  // nodes without children, roots excluded
    std::size_t node_count_ = 0;
    std::uint64_t clock_ = 0;  // last-use stamps
    RadixCacheCounters counters_;
};

}  // namespace omnirt::engine

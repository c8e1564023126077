#include "engine/radix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace omnirt::engine {
namespace {

constexpr std::int32_t kBlockSize = 4;

std::vector<std::int32_t> iota_tokens(std::size_t count, std::int32_t first = 0) {
    std::vector<std::int32_t> tokens(count);
    std::iota(tokens.begin(), tokens.end(), first);
    return tokens;
}

// A finished sequence: allocates blocks for `tokens`, caches its full blocks, releases its own
// references (as the scheduler does when a request ends). Returns the blocks of the full part.
std::vector<BlockId> finish_sequence(BlockAllocator& allocator, RadixCache& cache,
                                     const std::vector<std::int32_t>& tokens,
                                     const std::string& salt = "") {
    const std::size_t full = tokens.size() / kBlockSize;
    std::vector<BlockId> blocks = cache.match(salt, tokens);
    auto fresh = allocator.allocate((tokens.size() + kBlockSize - 1) / kBlockSize - blocks.size());
    EXPECT_TRUE(fresh.has_value());
    blocks.insert(blocks.end(), fresh->begin(), fresh->end());
    cache.insert(salt, tokens, std::span<BlockId>(blocks).first(full));
    allocator.release(blocks);
    return std::vector<BlockId>(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(full));
}

TEST(RadixCacheTest, MatchesTheLongestBlockAlignedPrefixWithReferences) {
    BlockAllocator allocator(16);
    RadixCache cache(allocator, kBlockSize);
    const auto tokens = iota_tokens(10);  // 2 full blocks + 2 tokens
    const auto cached = finish_sequence(allocator, cache, tokens);
    ASSERT_EQ(cached.size(), 2u);
    EXPECT_EQ(cache.cached_blocks(), 2u);
    EXPECT_EQ(allocator.used_blocks(), 2u);  // the partial block went back
    EXPECT_EQ(cache.evictable_blocks(), 2u);

    // Same first block, different second block.
    std::vector<std::int32_t> other = iota_tokens(9);
    other[5] = 99;
    auto hit = cache.match("", other);
    EXPECT_EQ(hit, std::vector<BlockId>{cached[0]});
    EXPECT_EQ(allocator.ref_count(cached[0]), 2);
    EXPECT_EQ(cache.evictable_blocks(), 1u);
    allocator.release(hit);

    // Fewer tokens than a block: nothing.
    EXPECT_TRUE(cache.match("", iota_tokens(3)).empty());
    // Exactly the cached tokens.
    auto full = cache.match("", iota_tokens(8));
    EXPECT_EQ(full, cached);
    allocator.release(full);
    // Another salt shares nothing.
    EXPECT_TRUE(cache.match("image:abc", tokens).empty());
    EXPECT_EQ(cache.counters().matched_blocks, 3u);
}

TEST(RadixCacheTest, InsertKeepsTheCachedBlockAndSwapsTheDuplicate) {
    BlockAllocator allocator(16);
    RadixCache cache(allocator, kBlockSize);
    const auto tokens = iota_tokens(8);
    const auto cached = finish_sequence(allocator, cache, tokens);

    // A sequence that computed the same positions in blocks of its own (admitted before the
    // first one was cached).
    auto own = allocator.allocate(2);
    ASSERT_TRUE(own.has_value());
    std::vector<BlockId> table = *own;
    EXPECT_EQ(cache.insert("", tokens, table), 0u);
    EXPECT_EQ(table, cached);  // now the cached blocks, with a reference for the caller
    EXPECT_EQ(allocator.ref_count(cached[0]), 2);
    EXPECT_EQ(allocator.used_blocks(), 2u);  // its duplicates were freed
    EXPECT_EQ(cache.counters().deduplicated_blocks, 2u);
    allocator.release(table);
    allocator.check_invariants();
}

TEST(RadixCacheTest, EvictsUnreferencedLeavesLeastRecentlyUsedFirst) {
    BlockAllocator allocator(16);
    RadixCache cache(allocator, kBlockSize);
    // Three sequences: a = [A0 A1], b = [B0], c = [A0 C1] (shares a's first block).
    std::vector<std::int32_t> a = iota_tokens(8, 0);
    std::vector<std::int32_t> b = iota_tokens(4, 100);
    std::vector<std::int32_t> c = iota_tokens(8, 0);
    c[4] = 50;
    const auto blocks_a = finish_sequence(allocator, cache, a);
    const auto blocks_b = finish_sequence(allocator, cache, b);
    const auto blocks_c = finish_sequence(allocator, cache, c);
    ASSERT_EQ(blocks_c[0], blocks_a[0]);
    EXPECT_EQ(cache.cached_blocks(), 4u);
    EXPECT_EQ(allocator.used_blocks(), 4u);

    // Use b again so that a's second block is the oldest leaf, then c's, then b.
    allocator.release(cache.match("", b));
    EXPECT_EQ(cache.evict(1), 1u);
    EXPECT_EQ(allocator.ref_count(blocks_a[0]), 1);  // the shared parent stays
    EXPECT_EQ(allocator.free_blocks(), 13u);
    auto hit_a = cache.match("", a);
    EXPECT_EQ(hit_a, std::vector<BlockId>{blocks_a[0]});
    allocator.release(hit_a);

    // A referenced leaf is never evicted: hold b.
    auto held = cache.match("", b);
    ASSERT_EQ(held.size(), 1u);
    // c's second block goes; then the shared first block became a leaf and goes too.
    EXPECT_EQ(cache.evict(5), 2u);
    EXPECT_EQ(cache.cached_blocks(), 1u);
    EXPECT_EQ(allocator.ref_count(blocks_b[0]), 2);
    allocator.release(held);
    EXPECT_EQ(cache.evict(5), 1u);
    EXPECT_EQ(cache.cached_blocks(), 0u);
    EXPECT_EQ(allocator.free_blocks(), 16u);
    EXPECT_EQ(cache.counters().evicted_blocks, 4u);
    allocator.check_invariants();
}

TEST(RadixCacheTest, ParentsOutliveReferencedChildren) {
    BlockAllocator allocator(8);
    RadixCache cache(allocator, kBlockSize);
    const auto tokens = iota_tokens(12);
    finish_sequence(allocator, cache, tokens);
    auto held = cache.match("", tokens);  // the whole path
    ASSERT_EQ(held.size(), 3u);
    EXPECT_EQ(cache.evict(3), 0u);
    EXPECT_EQ(cache.evictable_blocks(), 0u);
    allocator.release(held);
    EXPECT_EQ(cache.evictable_blocks(), 3u);
    EXPECT_EQ(cache.evict(3), 3u);
    EXPECT_EQ(allocator.free_blocks(), 8u);
}

TEST(RadixCacheTest, ClearReleasesTheCacheReferencesOnly) {
    BlockAllocator allocator(8);
    RadixCache cache(allocator, kBlockSize);
    finish_sequence(allocator, cache, iota_tokens(8));
    finish_sequence(allocator, cache, iota_tokens(4, 40), "salt");
    auto held = cache.match("", iota_tokens(8));
    cache.clear();
    EXPECT_EQ(cache.cached_blocks(), 0u);
    EXPECT_EQ(allocator.used_blocks(), 2u);  // still held by the "sequence"
    allocator.release(held);
    EXPECT_EQ(allocator.free_blocks(), 8u);
    allocator.check_invariants();
}

TEST(RadixCacheTest, ExhaustionIsRelievedByEviction) {
    BlockAllocator allocator(4);
    RadixCache cache(allocator, kBlockSize);
    finish_sequence(allocator, cache, iota_tokens(16));  // every block cached
    EXPECT_EQ(allocator.free_blocks(), 0u);
    EXPECT_FALSE(allocator.allocate(2).has_value());
    EXPECT_EQ(cache.evict(2), 2u);  // the two deepest blocks (leaf first)
    auto blocks = allocator.allocate(2);
    ASSERT_TRUE(blocks.has_value());
    auto hit = cache.match("", iota_tokens(16));
    EXPECT_EQ(hit.size(), 2u);  // the first two blocks survived
    allocator.release(hit);
    allocator.release(*blocks);
    allocator.check_invariants();
}

}  // namespace
}  // namespace omnirt::engine

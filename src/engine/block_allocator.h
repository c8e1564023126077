#pragma once
// BlockAllocator: the fixed pool of KV-cache blocks of one engine. A block is an index into the
// KV cache's block dimension (kv_cache.h); its memory is never touched here.
//
// Every block has a reference count: a running sequence holds one reference per block of its
// block table; the prefix cache (radix_cache.h) holds one per cached block. A block is free when
// its count is 0. Sharing a block (a prefix-cache hit) is retain(); giving it up is release().
//
// Thread safety: none. The engine thread owns the allocator (ar_scheduler.h).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"

namespace omnirt::engine {

using BlockId = std::int32_t;

class BlockAllocator {
  public:
    // `num_blocks` must be positive (aborts otherwise: a configuration bug caught earlier).
    explicit BlockAllocator(std::int32_t num_blocks);
    BlockAllocator(const BlockAllocator&) = delete;
    BlockAllocator& operator=(const BlockAllocator&) = delete;

    // `count` free blocks, each with reference count 1; all or nothing: resource_exhausted
    // (nothing allocated) when fewer than `count` are free. allocate(0) gives an empty list.
    [[nodiscard]] Result<std::vector<BlockId>> allocate(std::size_t count);
    // One more reference to an allocated block (aborts for a free or unknown block).
    void retain(BlockId block);
    // Drops one reference; the block is free again when its count reaches 0. Aborts for a free
    // or unknown block (a double free is a bug).
    void release(BlockId block);
    void release(std::span<const BlockId> blocks);

    [[nodiscard]] std::int32_t ref_count(BlockId block) const;
    [[nodiscard]] std::size_t free_blocks() const { return free_.size(); }
    [[nodiscard]] std::size_t total_blocks() const { return ref_counts_.size(); }
    [[nodiscard]] std::size_t used_blocks() const { return total_blocks() - free_blocks(); }

    // Aborts unless the free list holds exactly the blocks whose count is 0, each once. O(n);
    // for tests and debug checks.
    void check_invariants() const;

  private:
    void check_block(BlockId block, const char* operation) const;

    std::vector<std::int32_t> ref_counts_;
    // Free blocks; allocation takes from the back, so recently freed blocks are reused first
    // (warm in caches). Deterministic: the same calls give the same block ids.
    std::vector<BlockId> free_;
};

}  // namespace omnirt::engine

#include "engine/block_allocator.h"

#include <algorithm>
#include <string>

namespace omnirt::engine {

BlockAllocator::BlockAllocator(std::int32_t num_blocks) {
    OMNI_CHECK(num_blocks > 0, "BlockAllocator needs at least one block");
    ref_counts_.assign(static_cast<std::size_t>(num_blocks), 0);
    free_.reserve(static_cast<std::size_t>(num_blocks));
    // Block 0 ends at the back, so the first allocations are 0, 1, 2, ...
    for (std::int32_t block = num_blocks - 1; block >= 0; --block) free_.push_back(block);
}

Result<std::vector<BlockId>> BlockAllocator::allocate(std::size_t count) {
    if (count > free_.size()) {
        return fail(ErrorCode::resource_exhausted, "KV cache: " + std::to_string(count) +
                                                       " blocks wanted, " +
                                                       std::to_string(free_.size()) + " free of " +
                                                       std::to_string(total_blocks()));
    }
    std::vector<BlockId> blocks(free_.end() - static_cast<std::ptrdiff_t>(count), free_.end());
    free_.resize(free_.size() - count);
    // The tail of the free list is in reverse allocation order; hand blocks out front to back.
    std::reverse(blocks.begin(), blocks.end());
    for (BlockId block : blocks) {
        OMNI_CHECK(ref_counts_[static_cast<std::size_t>(block)] == 0,
                   "BlockAllocator: a block on the free list is referenced");
        ref_counts_[static_cast<std::size_t>(block)] = 1;
    }
    return blocks;
}

void BlockAllocator::check_block(BlockId block, const char* operation) const {
    OMNI_CHECK(block >= 0 && static_cast<std::size_t>(block) < ref_counts_.size(),
               std::string("BlockAllocator::") + operation + ": block " + std::to_string(block) +
                   " is outside the pool");
    OMNI_CHECK(ref_counts_[static_cast<std::size_t>(block)] > 0,
               std::string("BlockAllocator::") + operation + ": block " + std::to_string(block) +
                   " is free");
}

void BlockAllocator::retain(BlockId block) {
    check_block(block, "retain");
    ++ref_counts_[static_cast<std::size_t>(block)];
}

void BlockAllocator::release(BlockId block) {
    check_block(block, "release");
    if (--ref_counts_[static_cast<std::size_t>(block)] == 0) free_.push_back(block);
}

void BlockAllocator::release(std::span<const BlockId> blocks) {
    for (BlockId block : blocks) release(block);
}

std::int32_t BlockAllocator::ref_count(BlockId block) const {
    OMNI_CHECK(
        block >= 0 && static_cast<std::size_t>(block) < ref_counts_.size(),
        "BlockAllocator::ref_count: block " + std::to_string(block) + " is outside the pool");
    return ref_counts_[static_cast<std::size_t>(block)];
}

void BlockAllocator::check_invariants() const {
    std::vector<bool> on_free_list(ref_counts_.size(), false);
    for (BlockId block : free_) {
        OMNI_CHECK(block >= 0 && static_cast<std::size_t>(block) < ref_counts_.size(),
                   "BlockAllocator: the free list holds a block outside the pool");
        OMNI_CHECK(!on_free_list[static_cast<std::size_t>(block)],
                   "BlockAllocator: a block is on the free list twice");
        on_free_list[static_cast<std::size_t>(block)] = true;
    }
    for (std::size_t block = 0; block < ref_counts_.size(); ++block) {
        OMNI_CHECK(ref_counts_[block] >= 0, "BlockAllocator: a negative reference count");
        OMNI_CHECK((ref_counts_[block] == 0) == on_free_list[block],
                   "BlockAllocator: block " + std::to_string(block) +
                       (on_free_list[block] ? " is referenced but on the free list"
                                            : " is unreferenced but not on the free list"));
    }
}

}  // namespace omnirt::engine

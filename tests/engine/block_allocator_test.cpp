#include "engine/block_allocator.h"

#include <gtest/gtest.h>

#include <vector>

namespace omnirt::engine {
namespace {

TEST(BlockAllocatorTest, AllocatesInOrderAndFreesOnLastRelease) {
    BlockAllocator allocator(4);
    EXPECT_EQ(allocator.total_blocks(), 4u);
    EXPECT_EQ(allocator.free_blocks(), 4u);
    auto blocks = allocator.allocate(3);
    ASSERT_TRUE(blocks.has_value());
    EXPECT_EQ(*blocks, (std::vector<BlockId>{0, 1, 2}));
    EXPECT_EQ(allocator.free_blocks(), 1u);
    EXPECT_EQ(allocator.used_blocks(), 3u);
    for (BlockId block : *blocks) EXPECT_EQ(allocator.ref_count(block), 1);

    allocator.retain(1);
    EXPECT_EQ(allocator.ref_count(1), 2);
    allocator.release(*blocks);
    EXPECT_EQ(allocator.free_blocks(), 3u);  // block 1 is still shared
    EXPECT_EQ(allocator.ref_count(1), 1);
    allocator.release(1);
    EXPECT_EQ(allocator.free_blocks(), 4u);
    allocator.check_invariants();
}

TEST(BlockAllocatorTest, AllOrNothing) {
    BlockAllocator allocator(3);
    auto first = allocator.allocate(2);
    ASSERT_TRUE(first.has_value());
    auto too_many = allocator.allocate(2);
    ASSERT_FALSE(too_many.has_value());
    EXPECT_EQ(too_many.error().code, ErrorCode::resource_exhausted);
    EXPECT_NE(too_many.error().message.find("2 blocks wanted, 1 free of 3"), std::string::npos)
        << too_many.error().message;
    EXPECT_EQ(allocator.free_blocks(), 1u);  // nothing was taken
    auto none = allocator.allocate(0);
    ASSERT_TRUE(none.has_value());
    EXPECT_TRUE(none->empty());
    auto last = allocator.allocate(1);
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ(allocator.free_blocks(), 0u);
    EXPECT_FALSE(allocator.allocate(1).has_value());
    allocator.check_invariants();
}

TEST(BlockAllocatorTest, RecentlyFreedBlocksComeBackFirst) {
    BlockAllocator allocator(8);
    auto blocks = allocator.allocate(8);
    ASSERT_TRUE(blocks.has_value());
    allocator.release(5);
    allocator.release(2);
    auto again = allocator.allocate(2);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, (std::vector<BlockId>{2, 5}));
    allocator.check_invariants();
}

TEST(BlockAllocatorDeathTest, DoubleFreeAndUnknownBlocksAbort) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            BlockAllocator allocator(2);
            auto blocks = allocator.allocate(1);
            allocator.release((*blocks)[0]);
            allocator.release((*blocks)[0]);
        },
        "is free");
    EXPECT_DEATH(
        {
            BlockAllocator allocator(2);
            allocator.retain(7);
        },
        "outside the pool");
    EXPECT_DEATH(
        {
            BlockAllocator allocator(2);
            allocator.retain(1);
        },
        "is free");
}

}  // namespace
}  // namespace omnirt::engine

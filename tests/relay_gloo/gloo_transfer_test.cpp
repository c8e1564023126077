// Transfers through the gloo relay inside one process: every size class, worlds of 2 and 3,
// many concurrent transfers between one pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "relay_gloo/gloo_world.h"

namespace omnirt::relay::testing {
namespace {

// Moves `nbytes` from rank `src` to rank `dst` and checks the bytes and the metadata.
void transfer_and_check(GlooWorld& world, std::int64_t src, std::int64_t dst, std::size_t nbytes,
                        std::uint64_t seed, std::int64_t expected_tag) {
    SCOPED_TRACE("rank " + std::to_string(src) + " -> " + std::to_string(dst) + ", " +
                 std::to_string(nbytes) + " bytes");
    const std::string id = "req-" + std::to_string(seed);
    auto put = world[src].put_async(patterned(nbytes, seed), id, dst);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    const Value& metadata = (*put)->metadata();
    EXPECT_EQ(metadata.find("backend")->as_string(), "gloo");
    EXPECT_EQ(metadata_int(metadata, "nbytes"), static_cast<std::int64_t>(nbytes));
    EXPECT_EQ(metadata_int(metadata, "src_rank"), src);
    EXPECT_EQ(metadata_int(metadata, "dst_rank"), dst);
    EXPECT_EQ(metadata_int(metadata, "tag"), expected_tag);
    EXPECT_EQ(metadata.find("dtype")->as_string(), "uint8");

    auto dest = Tensor::empty({static_cast<std::int64_t>(nbytes)}, DType::u8);
    ASSERT_TRUE(dest.has_value());
    auto get = world[dst].get_async(metadata, *dest, id);
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    auto received = (*get)->wait_for_completion(kGuard);
    ASSERT_TRUE(received.has_value()) << received.error().to_string();
    auto sent = (*put)->wait_for_completion(kGuard);
    ASSERT_TRUE(sent.has_value()) << sent.error().to_string();
    EXPECT_EQ((*get)->tensor().data(), dest->data()) << "received into the caller's tensor";
    EXPECT_EQ(pattern_mismatch((*get)->tensor(), seed), "");
    world[src].cleanup(id);
    world[dst].cleanup(id);
}

TEST(GlooRelay, MovesEverySizeBetweenTwoRanks) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    const std::size_t sizes[] = {0, 1, 4095, std::size_t{1} << 20, std::size_t{64} << 20};
    std::int64_t tag = 0;
    for (std::size_t nbytes : sizes) {
        transfer_and_check(world, 0, 1, nbytes, 100 + tag, tag);
        transfer_and_check(world, 1, 0, nbytes, 200 + tag, tag);
        ++tag;
    }
}

TEST(GlooRelay, MovesBetweenEveryPairOfThreeRanks) {
    GlooWorld world(3);
    ASSERT_TRUE(world.formed(3));
    const std::size_t sizes[] = {0, 1, 4095, std::size_t{1} << 20};
    std::uint64_t seed = 1;
    for (std::size_t round = 0; round < std::size(sizes); ++round) {
        for (std::int64_t src = 0; src < 3; ++src) {
            for (std::int64_t dst = 0; dst < 3; ++dst) {
                if (src == dst) continue;
                // Tags count per (source, destination) pair.
                transfer_and_check(world, src, dst, sizes[round], seed++,
                                   static_cast<std::int64_t>(round));
            }
        }
    }
}

TEST(GlooRelay, ManyConcurrentTransfersBetweenOnePairStayApart) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    constexpr int kTransfers = 48;
    std::vector<std::unique_ptr<PutOperation>> puts;
    std::vector<std::size_t> sizes;
    for (int i = 0; i < kTransfers; ++i) {
        std::size_t nbytes = (i % 8 == 0) ? (std::size_t{256} << 10) + i : 1000 + 37 * i;
        auto put = world[0].put_async(patterned(nbytes, i), "req-" + std::to_string(i % 4), 1);
        ASSERT_TRUE(put.has_value()) << put.error().to_string();
        EXPECT_EQ(metadata_int((*put)->metadata(), "tag"), i);
        puts.push_back(std::move(*put));
        sizes.push_back(nbytes);
    }
    // Receive in an order unrelated to the sends', and wait in yet another.
    std::vector<int> order(kTransfers);
    for (int i = 0; i < kTransfers; ++i) order[i] = i;
    std::mt19937 random(7);
    std::shuffle(order.begin(), order.end(), random);
    std::vector<std::unique_ptr<GetOperation>> gets(kTransfers);
    for (int i : order) {
        auto dest = Tensor::empty({static_cast<std::int64_t>(sizes[i])}, DType::u8);
        ASSERT_TRUE(dest.has_value());
        auto get = world[1].get_async(puts[i]->metadata(), *dest, "req-" + std::to_string(i % 4));
        ASSERT_TRUE(get.has_value()) << get.error().to_string();
        gets[i] = std::move(*get);
    }
    std::shuffle(order.begin(), order.end(), random);
    for (int i : order) {
        auto received = gets[i]->wait_for_completion(kGuard);
        ASSERT_TRUE(received.has_value()) << received.error().to_string();
        EXPECT_EQ(pattern_mismatch(gets[i]->tensor(), i), "") << "transfer " << i;
    }
    for (auto& put : puts) {
        auto sent = put->wait_for_completion(kGuard);
        EXPECT_TRUE(sent.has_value()) << sent.error().to_string();
    }
}

TEST(GlooRelay, BothDirectionsAtOnceFromSeveralThreads) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    // Each thread sends its own transfers and receives the other rank's, through the same pair
    // of relays; metadata crosses over through per-direction lists filled before receiving.
    constexpr int kPerDirection = 16;
    std::vector<std::unique_ptr<PutOperation>> puts[2];
    for (int src = 0; src < 2; ++src) {
        for (int i = 0; i < kPerDirection; ++i) {
            auto put = world[src].put_async(patterned(5000 + i, 1000 * src + i), "r", 1 - src);
            ASSERT_TRUE(put.has_value()) << put.error().to_string();
            puts[src].push_back(std::move(*put));
        }
    }
    std::vector<std::string> failures[2];
    {
        std::vector<std::jthread> threads;
        for (int dst = 0; dst < 2; ++dst) {
            threads.emplace_back([&, dst] {
                const int src = 1 - dst;
                for (int i = 0; i < kPerDirection; ++i) {
                    auto get = world[dst].get_async(puts[src][i]->metadata(), Tensor{}, "r");
                    if (!get) {
                        failures[dst].push_back(get.error().to_string());
                        continue;
                    }
                    auto received = (*get)->wait_for_completion(kGuard);
                    if (!received) failures[dst].push_back(received.error().to_string());
                    std::string mismatch = pattern_mismatch((*get)->tensor(), 1000 * src + i);
                    if (!mismatch.empty()) failures[dst].push_back(mismatch);
                }
            });
        }
    }
    EXPECT_TRUE(failures[0].empty()) << failures[0].front();
    EXPECT_TRUE(failures[1].empty()) << failures[1].front();
    for (auto& direction : puts) {
        for (auto& put : direction) EXPECT_TRUE(put->wait_for_completion(kGuard).has_value());
    }
}

TEST(GlooRelay, AllocatesTheDestinationFromTheMetadataWhenNoneIsGiven) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    std::vector<float> values(15);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
    Tensor sent = Tensor::from_vector(values, {3, 5});
    auto put = world[0].put_async(sent, "r", 1);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    auto get = world[1].get_async((*put)->metadata(), Tensor{}, "r");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    ASSERT_TRUE((*get)->wait_for_completion(kGuard).has_value());
    EXPECT_TRUE((*get)->tensor().equals(sent));  // dtype float32, shape {3, 5}, same values
    EXPECT_TRUE((*put)->wait_for_completion(kGuard).has_value());
}

TEST(GlooRelay, MovesBytesWhateverTheDestinationDtypeAndShape) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    Tensor sent = Tensor::from_vector(std::vector<std::int32_t>{1, -2, 3, -4}, {2, 2});
    auto put = world[1].put_async(sent, "r", 0);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    auto dest = Tensor::empty({16}, DType::u8);
    ASSERT_TRUE(dest.has_value());
    auto get = world[0].get_async((*put)->metadata(), *dest, "r");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    ASSERT_TRUE((*get)->wait_for_completion(kGuard).has_value());
    EXPECT_EQ(std::memcmp(dest->data(), sent.data(), 16), 0);
    EXPECT_TRUE((*put)->wait_for_completion(kGuard).has_value());
}

TEST(GlooRelay, ZeroByteTransfersCompleteWithoutThePeer) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    auto empty = Tensor::empty({0, 4}, DType::f32);
    ASSERT_TRUE(empty.has_value());
    auto put = world[0].put_async(*empty, "r", 1);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    // Complete on the sender before anyone receives, and on the receiver on its own.
    EXPECT_TRUE((*put)->wait_for_completion(0ms).has_value());
    auto get = world[1].get_async((*put)->metadata(), Tensor{}, "r");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    EXPECT_TRUE((*get)->wait_for_completion(0ms).has_value());
    EXPECT_EQ((*get)->tensor().shape(), (Shape{0, 4}));
    // The pair is still in step: a real transfer follows.
    transfer_and_check(world, 0, 1, 4096, 9, 1);
}

TEST(GlooRelay, DeclaresItsCapabilities) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    Capabilities caps = world[0].capabilities();
    EXPECT_TRUE(caps.needs_rank_topology);
    EXPECT_TRUE(caps.cross_host);
    EXPECT_FALSE(caps.zero_copy_receive);
    EXPECT_FALSE(caps.device_memory);
    EXPECT_EQ(world[0].backend(), "gloo");
}

}  // namespace
}  // namespace omnirt::relay::testing

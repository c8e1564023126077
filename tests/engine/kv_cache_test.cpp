// KVCache: layout, zero fill, sizes, copy-on-write block copies and invalid arguments.
#include "engine/kv_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace omnirt::engine {
namespace {

const KVCacheSpec kSpec{.num_layers = 3, .num_kv_heads = 2, .head_dim = 8, .dtype = at::kFloat};

TEST(KVCache, LayersAreZeroFilledPagedTensors) {
    auto cache = KVCache::create(kSpec, 5, 4);
    ASSERT_TRUE(cache.has_value()) << cache.error().to_string();
    KVCache& c = **cache;
    EXPECT_EQ(c.num_blocks(), 5);
    EXPECT_EQ(c.block_size(), 4);
    EXPECT_EQ(c.spec().num_layers, 3);
    EXPECT_TRUE(c.device().is_cpu());
    for (int layer = 0; layer < 3; ++layer) {
        for (at::Tensor* t : {&c.keys(layer), &c.values(layer)}) {
            EXPECT_EQ(t->sizes(), (at::IntArrayRef{5, 4, 2, 8}));
            EXPECT_EQ(t->scalar_type(), at::kFloat);
            EXPECT_TRUE(t->is_contiguous());
            EXPECT_EQ(t->abs().sum().item<double>(), 0.0);
        }
    }
    // Every tensor has storage of its own.
    EXPECT_NE(c.keys(0).data_ptr(), c.values(0).data_ptr());
    EXPECT_NE(c.keys(0).data_ptr(), c.keys(1).data_ptr());
}

TEST(KVCache, BytesPerBlockCountsKeysAndValuesOfEveryLayer) {
    EXPECT_EQ(KVCache::bytes_per_block(kSpec, 4), 2 * 3 * 4 * 2 * 8 * 4);
    KVCacheSpec bf16 = kSpec;
    bf16.dtype = at::kBFloat16;
    EXPECT_EQ(KVCache::bytes_per_block(bf16, 16), 2 * 3 * 16 * 2 * 8 * 2);
    auto cache = KVCache::create(bf16, 7, 16);
    ASSERT_TRUE(cache.has_value());
    std::int64_t total = 0;
    for (int layer = 0; layer < 3; ++layer) {
        total += static_cast<std::int64_t>((*cache)->keys(layer).nbytes() +
                                           (*cache)->values(layer).nbytes());
    }
    EXPECT_EQ(total, 7 * KVCache::bytes_per_block(bf16, 16));
}

TEST(KVCache, CopyBlockCopiesEveryLayerAndNothingElse) {
    auto created = KVCache::create(kSpec, 4, 2);
    ASSERT_TRUE(created.has_value());
    KVCache& cache = **created;
    at::manual_seed(0);
    for (int layer = 0; layer < 3; ++layer) {
        cache.keys(layer).copy_(at::randn(cache.keys(layer).sizes()));
        cache.values(layer).copy_(at::randn(cache.values(layer).sizes()));
    }
    std::vector<at::Tensor> keys_before;
    std::vector<at::Tensor> values_before;
    for (int layer = 0; layer < 3; ++layer) {
        keys_before.push_back(cache.keys(layer).clone());
        values_before.push_back(cache.values(layer).clone());
    }
    cache.copy_block(1, 3);
    cache.copy_block(2, 2);  // a no-op
    for (int layer = 0; layer < 3; ++layer) {
        EXPECT_TRUE(cache.keys(layer)[3].equal(keys_before[layer][1]));
        EXPECT_TRUE(cache.values(layer)[3].equal(values_before[layer][1]));
        for (int block : {0, 1, 2}) {
            EXPECT_TRUE(cache.keys(layer)[block].equal(keys_before[layer][block]));
            EXPECT_TRUE(cache.values(layer)[block].equal(values_before[layer][block]));
        }
    }
}

TEST(KVCache, InvalidSizesAreRefused) {
    for (auto [blocks, block_size] :
         {std::pair<std::int64_t, std::int64_t>{0, 4}, {4, 0}, {-1, 4}}) {
        auto cache = KVCache::create(kSpec, blocks, block_size);
        ASSERT_FALSE(cache.has_value());
        EXPECT_EQ(cache.error().code, ErrorCode::invalid_argument);
    }
    KVCacheSpec no_layers = kSpec;
    no_layers.num_layers = 0;
    EXPECT_FALSE(KVCache::create(no_layers, 4, 4).has_value());
    auto too_many = KVCache::create(kSpec, std::int64_t{1} << 40, 1);
    ASSERT_FALSE(too_many.has_value());
    EXPECT_EQ(too_many.error().code, ErrorCode::out_of_range);
}

TEST(KVCacheDeathTest, OutOfRangeLayerOrBlockAborts) {
    auto cache = KVCache::create(kSpec, 2, 2);
    ASSERT_TRUE(cache.has_value());
    EXPECT_DEATH((void)(*cache)->keys(3), "layer out of range");
    EXPECT_DEATH((*cache)->copy_block(0, 2), "block id out of range");
}

}  // namespace
}  // namespace omnirt::engine

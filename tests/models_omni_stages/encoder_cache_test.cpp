// EncoderCache: least recently used entries go first, the bytes never pass the capacity, outputs
// larger than the capacity are not kept, capacity 0 keeps nothing, concurrent use is safe.
#include "models/qwen3_omni/encoder_cache.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace omnirt::models::qwen3_omni {
namespace {

// An output map holding `floats` float32 values (4 * floats bytes).
Value output(std::int64_t floats, float fill = 0.0f) {
    return Value(Map{{"embeddings",
                      Value(Tensor::from_vector(
                          std::vector<float>(static_cast<std::size_t>(floats), fill), {floats}))}});
}

EncoderCacheKey key(std::int64_t content, std::int64_t rows = 4) {
    return {.content = content, .shape = {1, rows, rows}};
}

TEST(EncoderCache, TensorBytesCountEachStorageOnce) {
    const Value single = output(10);
    EXPECT_EQ(tensor_bytes(single), 40u);
    const Value& tensor = *single.find("embeddings");
    EXPECT_EQ(tensor_bytes(Value(Map{{"a", tensor}, {"b", Value(List{tensor, output(2)})}})), 48u);
}

TEST(EncoderCache, EvictsLeastRecentlyUsedWithinCapacity) {
    EncoderCache cache(100);  // two entries of 40 bytes
    cache.insert(key(1), output(10, 1));
    cache.insert(key(2), output(10, 2));
    ASSERT_TRUE(cache.find(key(1)).has_value());  // 1 is now the most recent
    cache.insert(key(3), output(10, 3));
    EXPECT_LE(cache.bytes(), 100u);
    EXPECT_EQ(cache.entries(), 2u);
    EXPECT_TRUE(cache.find(key(1)).has_value());
    EXPECT_FALSE(cache.find(key(2)).has_value());
    EXPECT_EQ(*cache.find(key(3)), output(10, 3));
    EXPECT_FALSE(cache.find(key(3, 6)).has_value());  // another shape, another item
}

TEST(EncoderCache, ReplacingAKeyKeepsOneEntry) {
    EncoderCache cache(1000);
    cache.insert(key(1), output(10, 1));
    cache.insert(key(1), output(20, 2));
    EXPECT_EQ(cache.entries(), 1u);
    EXPECT_EQ(cache.bytes(), 80u);
    EXPECT_EQ(*cache.find(key(1)), output(20, 2));
}

TEST(EncoderCache, TooLargeOrDisabledKeepsNothing) {
    EncoderCache small(30);
    small.insert(key(1), output(10));
    EXPECT_EQ(small.entries(), 0u);
    EXPECT_EQ(small.bytes(), 0u);
    EncoderCache off(0);
    off.insert(key(1), output(0));
    EXPECT_EQ(off.entries(), 0u);
}

TEST(EncoderCache, ConcurrentUseStaysWithinCapacity) {
    EncoderCache cache(400);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&cache, t] {
            for (int i = 0; i < 500; ++i) {
                cache.insert(key((t * 7 + i) % 37), output(10 + i % 5));
                (void)cache.find(key(i % 37));
                EXPECT_LE(cache.bytes(), 400u);
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_LE(cache.bytes(), 400u);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

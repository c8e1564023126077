// S2-Pro's cache of encoded reference clips (reference_cache.h): keys by content, hits and misses,
// least-recently-used eviction, capacity 0, and concurrent use.
#include "models/s2_pro/reference_cache.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace omnirt::models::s2_pro {
namespace {

CodeMatrix codes(std::int32_t value) {
    return CodeMatrix{.codebooks = 2, .frames = 1, .codes = {value, value + 1}};
}

TEST(ReferenceCache, KeysFollowTheSamples) {
    const std::vector<float> a = {0.1f, -0.2f, 0.3f};
    std::vector<float> b = a;
    EXPECT_EQ(ReferenceCache::key_of(a), ReferenceCache::key_of(b));
    b[1] = -0.2000001f;  // one bit of one sample
    EXPECT_NE(ReferenceCache::key_of(a), ReferenceCache::key_of(b));
    const std::vector<float> longer = {0.1f, -0.2f, 0.3f, 0.0f};
    EXPECT_NE(ReferenceCache::key_of(a), ReferenceCache::key_of(longer));
    EXPECT_EQ(ReferenceCache::key_of(longer).samples, 4u);
}

TEST(ReferenceCache, HitsMissesAndLeastRecentlyUsedEviction) {
    ReferenceCache cache(2);
    const auto k1 = ReferenceCache::key_of(std::vector<float>{1});
    const auto k2 = ReferenceCache::key_of(std::vector<float>{2});
    const auto k3 = ReferenceCache::key_of(std::vector<float>{3});
    EXPECT_FALSE(cache.find(k1).has_value());
    cache.insert(k1, codes(10));
    cache.insert(k2, codes(20));
    ASSERT_TRUE(cache.find(k1).has_value());  // k1 is now the most recent
    EXPECT_EQ(cache.find(k1)->codes, (std::vector<std::int32_t>{10, 11}));
    cache.insert(k3, codes(30));  // evicts k2, the least recently used
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_FALSE(cache.find(k2).has_value());
    EXPECT_TRUE(cache.find(k3).has_value());
    cache.insert(k3, codes(31));  // replaces in place
    EXPECT_EQ(cache.find(k3)->codes.front(), 31);
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(cache.hits(), 4u);
    EXPECT_EQ(cache.misses(), 2u);
}

TEST(ReferenceCache, CapacityZeroKeepsNothing) {
    ReferenceCache cache(0);
    const auto key = ReferenceCache::key_of(std::vector<float>{1});
    cache.insert(key, codes(1));
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_FALSE(cache.find(key).has_value());
}

TEST(ReferenceCache, ConcurrentUseStaysBounded) {
    ReferenceCache cache(8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&cache, t] {
            for (int i = 0; i < 500; ++i) {
                const auto key =
                    ReferenceCache::key_of(std::vector<float>{float(i % 16), float(t)});
                if (!cache.find(key)) cache.insert(key, codes(i));
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_LE(cache.size(), 8u);
    EXPECT_EQ(cache.hits() + cache.misses(), 2000u);
}

}  // namespace
}  // namespace omnirt::models::s2_pro

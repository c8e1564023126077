// The shm relay's copy routine: large copies split across helper threads arrive intact, at
// odd sizes and offsets and from several threads at once.
#include "relay/shm/copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace omnirt::relay::shm {
namespace {

std::vector<std::byte> bytes(std::size_t n, unsigned seed) {
    std::vector<std::byte> out(n);
    unsigned state = seed;
    for (auto& b : out) {
        state = state * 1103515245u + 12345u;
        b = static_cast<std::byte>(state >> 16);
    }
    return out;
}

class ShmCopyTest : public ::testing::Test {
  protected:
    // The helper pool starts on the first large copy of the process; this binary asks for
    // helpers even on small machines, so that the parallel path runs everywhere.
    static void SetUpTestSuite() { ::setenv("OMNIRT_SHM_COPY_THREADS", "3", 1); }
};

TEST_F(ShmCopyTest, CopiesEverySizeAndOffset) {
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{4095}, (std::size_t{8} << 20) - 1,
          std::size_t{8} << 20, (std::size_t{8} << 20) + 3, std::size_t{37} << 20}) {
        for (std::size_t offset : {std::size_t{0}, std::size_t{5}}) {
            auto source = bytes(n + offset, static_cast<unsigned>(n));
            std::vector<std::byte> destination(n + offset + 1, std::byte{0xee});
            copy_bytes(destination.data() + offset, source.data() + offset, n);
            EXPECT_TRUE(
                std::equal(source.begin() + offset, source.end(), destination.begin() + offset))
                << n << " at " << offset;
            EXPECT_EQ(destination[n + offset], std::byte{0xee}) << "wrote past the end";
        }
    }
}

TEST_F(ShmCopyTest, ConcurrentLargeCopiesShareTheHelpers) {
    constexpr std::size_t kBytes = std::size_t{20} << 20;
    constexpr int kThreads = 4;
    std::vector<std::vector<std::byte>> sources, destinations;
    for (int i = 0; i < kThreads; ++i) {
        sources.push_back(bytes(kBytes, 100 + i));
        destinations.emplace_back(kBytes);
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
            for (int round = 0; round < 3; ++round) {
                copy_bytes(destinations[i].data(), sources[i].data(), kBytes);
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (int i = 0; i < kThreads; ++i) EXPECT_EQ(destinations[i], sources[i]) << i;
}

}  // namespace
}  // namespace omnirt::relay::shm

// The benchmark statistics: percentiles take p in percent.
#include <gtest/gtest.h>

#include "bench/relay_bench.h"

namespace omnirt::bench {
namespace {

TEST(Percentile, TakesPercentAndInterpolates) {
    std::vector<double> samples;
    for (int i = 100; i >= 1; --i) samples.push_back(i);  // unsorted on purpose
    EXPECT_DOUBLE_EQ(percentile(samples, 0), 1);
    EXPECT_DOUBLE_EQ(percentile(samples, 50), 50.5);
    EXPECT_NEAR(percentile(samples, 99), 99.01, 1e-9);
    EXPECT_DOUBLE_EQ(percentile(samples, 100), 100);
    EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
    EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
}

}  // namespace
}  // namespace omnirt::bench

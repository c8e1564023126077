#pragma once
// What the test stage `test.tp_all_reduce` (tp_all_reduce_plugin.cpp) answers for {"n": n}
// with two ranks: rank r adds (n + k) * (r + 1) for k = 0..3, so the sum is (n + k) * 3.
#include "core/value.h"

namespace omnirt::testing {

inline Value two_rank_sum(int n) {
    List sum;
    for (int k = 0; k < 4; ++k) sum.push_back(Value(static_cast<double>((n + k) * 3)));
    return Value(Map{{"n", n}, {"sum", Value(std::move(sum))}, {"ranks", 2}});
}

}  // namespace omnirt::testing

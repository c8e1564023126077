#pragma once
// `test.rank_log`: a test stage for tensor-parallel groups. Every rank appends the ids of the
// requests its scheduler computes to "<args.dir>/<stage>.rank<r>.log", one per line, then passes
// the input on (identity). Tests compare the ranks' logs to check that rank 0 fanned the same
// work out to every follower and that only rank 0's results left the group.
#include "core/error.h"
#include "core/registry.h"

namespace omnirt::pipeline {

// Idempotent.
[[nodiscard]] Status register_tp_test_stage(Registry& registry = Registry::global());

}  // namespace omnirt::pipeline

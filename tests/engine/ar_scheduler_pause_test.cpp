// ArScheduler pauses (flow control for slow clients): a paused request takes no step, keeps its
// KV blocks and leaves its batch slot; its resume continues to the same output; an abort of a
// paused request frees everything.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ar_scheduler.h"
#include "engine/fake_model.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {
using namespace std::chrono_literals;

constexpr auto kGuard = 60s;  // hang guard, never a synchronisation sleep

TEST(ArSchedulerPauseTest, APausedRequestHoldsItsBlocksWhileOthersRunThenResumesToTheSameOutput) {
    // One batch slot: the other request runs only because the paused one leaves its slot.
    Harness harness({.max_running_requests = 1, .enable_prefix_cache = false},
                    {.num_blocks = 128, .block_size = 4});
    const auto prompt = make_prompt(12, 7);
    harness.submit("slow", prompt, params_max_tokens(200));
    ASSERT_TRUE(harness.wait_for_chunks("slow", 3));
    harness.scheduler().pause("slow", true);
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.paused == 1 && stats.idle; }, kGuard));
    const ArSchedulerStats paused = harness.scheduler().stats();
    EXPECT_LT(paused.generated_tokens, 200u);
    EXPECT_LT(paused.free_blocks, 128u) << "the paused request keeps its KV blocks";
    EXPECT_EQ(harness.scheduler().load().paused_requests, 1);
    EXPECT_EQ(harness.scheduler().load().kv_blocks_used,
              static_cast<std::int64_t>(128 - paused.free_blocks));

    harness.submit("other", make_prompt(6, 8), params_max_tokens(20));
    ASSERT_TRUE(harness.wait_for_ends(1));
    ASSERT_TRUE(harness.outputs["other"].result.has_value());
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) { return stats.idle && stats.running == 1; }, kGuard));
    const ArSchedulerStats after_other = harness.scheduler().stats();
    // Only the other request generated meanwhile; the paused one kept its blocks.
    EXPECT_EQ(after_other.generated_tokens, paused.generated_tokens + 20);
    EXPECT_EQ(after_other.free_blocks, paused.free_blocks);
    EXPECT_EQ(after_other.preemptions, 0u);

    harness.scheduler().pause("slow", false);
    ASSERT_TRUE(harness.wait_for_ends(1));
    ASSERT_TRUE(harness.wait_idle_and_clean());
    harness.drain();
    EXPECT_EQ(harness.outputs["slow"].output_ids(), expected_greedy(prompt, 200));
    EXPECT_EQ(harness.outputs["slow"].streamed_ids(), expected_greedy(prompt, 200));
    EXPECT_EQ(harness.scheduler().stats().paused, 0u);
    EXPECT_EQ(harness.scheduler().stats().free_blocks, 128u);
}

TEST(ArSchedulerPauseTest, APauseBeforeTheRequestHoldsItAndAnAbortFreesIt) {
    Harness harness({.enable_prefix_cache = false}, {.num_blocks = 64, .block_size = 4});
    harness.scheduler().pause("early", true);  // the request is not here yet
    harness.scheduler().pause("never", true);  // nor will it ever be
    harness.scheduler().pause("never", false);
    harness.scheduler().pause("unknown", false);
    harness.submit("early", make_prompt(8, 1), params_max_tokens(50));
    harness.submit("other", make_prompt(8, 2), params_max_tokens(10));
    ASSERT_TRUE(harness.wait_for_ends(1));
    ASSERT_TRUE(harness.outputs["other"].result.has_value());
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) {
            return stats.idle && stats.waiting == 1 && stats.paused == 1;
        },
        kGuard));
    harness.drain();
    EXPECT_TRUE(harness.outputs["early"].client_chunks.empty());

    harness.scheduler().abort("early");
    ASSERT_TRUE(harness.wait_idle_and_clean());
    EXPECT_EQ(harness.scheduler().stats().free_blocks, 64u);
    EXPECT_EQ(harness.scheduler().load().paused_requests, 0);
    // A pause after the abort is not kept.
    harness.scheduler().pause("early", true);
    harness.submit("later", make_prompt(8, 3), params_max_tokens(5));
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_TRUE(harness.outputs["later"].result.has_value());
    harness.drain();
    EXPECT_FALSE(harness.outputs["early"].result.has_value());
}

}  // namespace
}  // namespace omnirt::engine::testing

// ArScheduler KV memory: admission under a block budget, preemption, abort, stop, and many
// concurrent requests; every block comes back.
#include "engine/ar_scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/fake_model.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {

TEST(ArSchedulerMemoryTest, AbortMidDecodeFreesBlocksAndSilencesTheRequest) {
    Harness harness({.enable_prefix_cache = false}, {.num_blocks = 128, .block_size = 4});
    const auto prompt = make_prompt(30, 4);
    harness.submit("long", prompt, params_max_tokens(400));
    harness.submit("short", make_prompt(10, 5), params_max_tokens(20));
    ASSERT_TRUE(harness.wait_for_chunks("long", 5));
    harness.scheduler().abort("long");
    ASSERT_TRUE(harness.wait_for_ends(1));  // "short" still completes
    ASSERT_TRUE(harness.outputs["short"].result.has_value());
    ASSERT_TRUE(harness.wait_idle_and_clean());
    EXPECT_EQ(harness.scheduler().stats().free_blocks, 128u);  // no prefix cache: all free
    EXPECT_EQ(harness.scheduler().stats().aborted_requests, 1u);
    harness.drain();
    EXPECT_FALSE(harness.outputs["long"].result.has_value());
    EXPECT_FALSE(harness.outputs["long"].error.has_value());
    EXPECT_LT(harness.outputs["long"].client_chunks.size(), 400u);
    // What it streamed before the abort was right.
    const auto streamed = harness.outputs["long"].streamed_ids();
    const auto reference = expected_greedy(prompt, static_cast<std::int64_t>(streamed.size()));
    EXPECT_EQ(streamed, reference);
    EXPECT_EQ(harness.scheduler().active_requests(), 0u);
}

TEST(ArSchedulerMemoryTest, AbortQueuedAndNotYetArrivedRequests) {
    Harness harness({.max_running_requests = 1, .enable_prefix_cache = false},
                    {.num_blocks = 64, .block_size = 4});
    harness.submit("running", make_prompt(8, 1), params_max_tokens(150));
    ASSERT_TRUE(harness.wait_for_chunks("running", 1));
    harness.submit("queued", make_prompt(8, 2), params_max_tokens(5));
    harness.scheduler().abort("queued");
    harness.scheduler().abort("future");  // before its request arrives
    harness.submit("future", make_prompt(8, 3), params_max_tokens(5));
    harness.submit("after", make_prompt(8, 4), params_max_tokens(5));
    ASSERT_TRUE(harness.wait_for_ends(2));  // "running" and "after"
    ASSERT_TRUE(harness.wait_idle_and_clean());
    harness.drain();
    EXPECT_TRUE(harness.outputs["running"].result.has_value());
    EXPECT_TRUE(harness.outputs["after"].result.has_value());
    EXPECT_TRUE(harness.outputs["queued"].client_chunks.empty());
    EXPECT_FALSE(harness.outputs["queued"].result.has_value());
    EXPECT_FALSE(harness.outputs["future"].result.has_value());
    EXPECT_EQ(harness.model().max_batch_size(), 1u);
}

struct PreemptionCase {
    bool prefix_cache;
};

class ArSchedulerPreemptionTest : public ::testing::TestWithParam<PreemptionCase> {};

TEST_P(ArSchedulerPreemptionTest, RecomputesPreemptedRequestsAndReturnsEveryBlock) {
    // 40 blocks of 4 = 160 positions; six requests of 10 + 60 tokens need 108 blocks at the end.
    constexpr std::int32_t kBlocks = 40;
    Harness harness({.watermark_blocks = 0, .enable_prefix_cache = GetParam().prefix_cache},
                    {.num_blocks = kBlocks, .block_size = 4});
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 6; ++i) {
        prompts.push_back(make_prompt(10, 40 + i));
        harness.submit("p" + std::to_string(i), prompts.back(), params_max_tokens(60));
    }
    ASSERT_TRUE(harness.wait_for_ends(6));
    for (int i = 0; i < 6; ++i) {
        const RequestOutput& output = harness.outputs["p" + std::to_string(i)];
        ASSERT_TRUE(output.result.has_value()) << (output.error ? output.error->to_string() : "");
        EXPECT_EQ(output.output_ids(), expected_greedy(prompts[static_cast<std::size_t>(i)], 60));
        // A preempted request streams every token once, in order.
        EXPECT_EQ(output.streamed_ids(), output.output_ids());
        const Value* usage = output.result->data.find("usage");
        EXPECT_EQ(usage->find("prompt_tokens")->as_int(), 10);
        EXPECT_EQ(usage->find("completion_tokens")->as_int(), 60);
    }
    ASSERT_TRUE(harness.wait_idle_and_clean());
    const ArSchedulerStats stats = harness.scheduler().stats();
    EXPECT_GT(stats.preemptions, 0u);
    EXPECT_EQ(harness.model().first_violation(), "");
    EXPECT_LE(harness.model().max_blocks_referenced(), static_cast<std::size_t>(kBlocks));
    if (!GetParam().prefix_cache) {
        EXPECT_EQ(stats.free_blocks, static_cast<std::size_t>(kBlocks));
    }
}

INSTANTIATE_TEST_SUITE_P(PrefixCache, ArSchedulerPreemptionTest,
                         ::testing::Values(PreemptionCase{false}, PreemptionCase{true}),
                         [](const auto& info) { return info.param.prefix_cache ? "on" : "off"; });

TEST(ArSchedulerMemoryTest, AdmissionNeverExceedsTheKvBudget) {
    // Prompts of 40 tokens need 10 blocks each at admission; 32 blocks admit at most 3 at once
    // (with the watermark of 1 block, two plus the first).
    constexpr std::int32_t kBlocks = 32;
    Harness harness({.enable_prefix_cache = false}, {.num_blocks = kBlocks, .block_size = 4});
    for (int i = 0; i < 8; ++i) {
        harness.submit("a" + std::to_string(i), make_prompt(40, 60 + i), params_max_tokens(3));
    }
    ASSERT_TRUE(harness.wait_for_ends(8));
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(harness.outputs["a" + std::to_string(i)].output_ids(),
                  expected_greedy(make_prompt(40, 60 + i), 3));
    }
    EXPECT_LE(harness.model().max_blocks_referenced(), static_cast<std::size_t>(kBlocks));
    EXPECT_LE(harness.model().max_batch_size(), 3u);
    EXPECT_EQ(harness.model().first_violation(), "");
    ASSERT_TRUE(harness.wait_idle_and_clean());
    EXPECT_EQ(harness.scheduler().stats().free_blocks, static_cast<std::size_t>(kBlocks));
}

TEST(ArSchedulerMemoryTest, TwoHundredConcurrentRequestsCompleteWithoutLoss) {
    constexpr std::int32_t kBlocks = 256;
    Harness harness({.max_running_requests = 64, .max_prefill_tokens = 256},
                    {.num_blocks = kBlocks, .block_size = 8});
    const auto shared = make_prompt(24, 4242);
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<std::int64_t> lengths;
    for (int i = 0; i < 200; ++i) {
        std::vector<std::int32_t> prompt = make_prompt(1 + (i * 37) % 50, 7000 + i);
        if (i % 3 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.end());
        prompts.push_back(prompt);
        lengths.push_back(1 + (i * 11) % 30);
        harness.submit("c" + std::to_string(i), prompt, params_max_tokens(lengths.back()));
    }
    ASSERT_TRUE(harness.wait_for_ends(200));
    for (int i = 0; i < 200; ++i) {
        const RequestOutput& output = harness.outputs["c" + std::to_string(i)];
        ASSERT_TRUE(output.result.has_value())
            << i << (output.error ? output.error->to_string() : "");
        EXPECT_EQ(output.output_ids(), expected_greedy(prompts[static_cast<std::size_t>(i)],
                                                       lengths[static_cast<std::size_t>(i)]))
            << i;
        EXPECT_EQ(output.client_chunks.size(),
                  static_cast<std::size_t>(lengths[static_cast<std::size_t>(i)]));
    }
    EXPECT_EQ(harness.outputs.size(), 200u);
    ASSERT_TRUE(harness.wait_idle_and_clean());
    const ArSchedulerStats stats = harness.scheduler().stats();
    EXPECT_EQ(stats.finished_requests, 200u);
    EXPECT_GT(stats.prefix_hit_tokens, 0u);
    EXPECT_LE(harness.model().max_batch_size(), 64u);
    EXPECT_LE(harness.model().max_blocks_referenced(), static_cast<std::size_t>(kBlocks));
    EXPECT_EQ(harness.model().first_violation(), "");
}

TEST(ArSchedulerMemoryTest, StopFreesEverything) {
    auto model = std::make_unique<FakeModel>(64, 4);
    auto created = ArScheduler::create({.stage_name = "t", .num_kv_blocks = 64, .block_size = 4},
                                       std::move(model));
    ASSERT_TRUE(created.has_value());
    ArScheduler& scheduler = **created;
    ASSERT_TRUE(scheduler.start().has_value());
    for (int i = 0; i < 4; ++i) {
        StagePayload payload{
            .request_id = "s" + std::to_string(i),
            .request = OmniRequest{.params = params_max_tokens(200)},
            .data = Value(Map{{"input_ids", Value(Tensor::from_vector(make_prompt(12, i)))}})};
        ASSERT_TRUE(scheduler.inbox().push(pipeline::IncomingMessage{
            .request_id = payload.request_id,
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(std::move(payload))}));
    }
    // Some output, then stop while they run (the outbox is drained as a Stage would).
    std::size_t chunks = 0;
    while (chunks < 8) {
        auto message = scheduler.outbox().pop();
        ASSERT_TRUE(message.has_value());
        if (message->kind == pipeline::OutgoingKind::stream) ++chunks;
    }
    std::thread drainer([&] {
        while (scheduler.outbox().pop()) {
        }
    });
    scheduler.stop();
    drainer.join();
    const ArSchedulerStats stats = scheduler.stats();
    EXPECT_EQ(stats.free_blocks, 64u);
    EXPECT_EQ(stats.cached_blocks, 0u);
    EXPECT_TRUE(stats.idle);
    EXPECT_EQ(scheduler.active_requests(), 0u);
    EXPECT_FALSE(scheduler.start().has_value());  // not restartable
    scheduler.stop();                             // idempotent
}

}  // namespace
}  // namespace omnirt::engine::testing

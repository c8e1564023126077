// Captures, explicit positions and layer injections through the engine, with the FakeModel
// (whose captured rows hold the cached value, a checksum of every earlier position, the layer
// and the position): captured rows equal a whole recompute after a prefix-cache hit, after
// chunked prefill and after preemption; explicit (3-axis) positions and the decode offset reach
// the model, also when positions are recomputed; injections change their rows at their layer.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/ar_scheduler.h"
#include "engine/fake_model.h"
#include "engine/hook_role.h"
#include "engine/scheduler_harness.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::engine::testing {
namespace {

using Rows = std::vector<std::vector<float>>;

// Captures: input embeddings (after 0 layers) from position 8 on, and the last layer's states
// of positions [3, 20).
std::vector<CaptureSpec> test_captures() {
    return {CaptureSpec{.after_layers = 0, .begin = 8, .end = -1},
            CaptureSpec{.after_layers = kFakeLayers, .begin = 3, .end = 20}};
}

std::unique_ptr<ArRole> capture_role(std::vector<CaptureSpec> specs = test_captures()) {
    return hook_role({.open = [specs](const StagePayload& payload) -> Result<RequestSetup> {
                          OMNI_TRY(RequestSetup setup, read_request_setup(payload));
                          setup.captures = specs;
                          return setup;
                      },
                      .add_to_result =
                          [](Map& data, const ArSequence& sequence) {
                              List captures;
                              for (const CaptureRows& capture : sequence.captures()) {
                                  at::Tensor rows = capture.rows();
                                  if (!rows.defined()) rows = at::zeros({0, kFakeHidden});
                                  captures.push_back(Value(
                                      *torch_bridge::from_torch(rows.to(at::kFloat).contiguous())));
                              }
                              data.insert_or_assign("captures", Value(std::move(captures)));
                          }});
}

std::vector<Rows> captured(const RequestOutput& output) {
    std::vector<Rows> out;
    const Value* captures = output.result ? output.result->data.find("captures") : nullptr;
    if (captures == nullptr) return out;
    for (const Value& value : captures->as_list()) {
        const Tensor& tensor = value.as_tensor();
        Rows rows;
        for (std::int64_t r = 0; r < tensor.shape()[0]; ++r) {
            const float* row = tensor.data_as<float>() + r * tensor.shape()[1];
            rows.emplace_back(row, row + tensor.shape()[1]);
        }
        out.push_back(rows);
    }
    return out;
}

// The reference: the request alone, no prefix cache, its prompt in one step.
std::vector<Rows> recomputed(const std::vector<std::int32_t>& prompt, std::int64_t max_tokens,
                             std::vector<CaptureSpec> specs = test_captures()) {
    Harness harness({.enable_prefix_cache = false}, {}, capture_role(std::move(specs)));
    harness.submit("ref", prompt, params_max_tokens(max_tokens));
    EXPECT_TRUE(harness.wait_for_ends(1));
    EXPECT_FALSE(harness.outputs["ref"].error.has_value());
    return captured(harness.outputs["ref"]);
}

TEST(ArCaptureTest, CapturesCoverThePromptAndEveryDecodeStep) {
    const auto prompt = make_prompt(12, 3);
    const std::vector<Rows> rows = recomputed(prompt, 6);
    ASSERT_EQ(rows.size(), 2u);
    // Open capture from 8: prompt positions 8..11 and the 5 decode inputs (the 6th token is
    // sampled but never fed). Closed capture [3, 20): positions 3..16.
    ASSERT_EQ(rows[0].size(), 4u + 5u);
    ASSERT_EQ(rows[1].size(), 14u);
    const auto output = expected_greedy(prompt, 6);
    std::vector<std::int64_t> history(prompt.begin(), prompt.end());
    history.insert(history.end(), output.begin(), output.end());
    for (std::size_t i = 0; i < rows[0].size(); ++i) {
        EXPECT_EQ(rows[0][i], fake_capture(history, 8 + static_cast<std::int64_t>(i), 0, 0)) << i;
    }
    for (std::size_t i = 0; i < rows[1].size(); ++i) {
        EXPECT_EQ(rows[1][i],
                  fake_capture(history, 3 + static_cast<std::int64_t>(i), kFakeLayers, 0))
            << i;
    }
}

TEST(ArCaptureTest, CapturesEqualARecomputeAfterAPrefixHit) {
    Harness harness({}, {.num_blocks = 256, .block_size = 4}, capture_role());
    const auto prompt = make_prompt(24, 5);
    harness.submit("warm", prompt, params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(1));
    harness.submit("hit", prompt, params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(1));
    // The hit stops short of position 3, the first one a capture still needs: no whole block
    // fits before it, so "hit" computes everything again.
    const std::vector<Rows> reference = recomputed(prompt, 4);
    EXPECT_EQ(captured(harness.outputs["warm"]), reference);
    EXPECT_EQ(captured(harness.outputs["hit"]), reference);
    EXPECT_EQ(harness.outputs["hit"].output_ids(), expected_greedy(prompt, 4));
    EXPECT_TRUE(harness.wait_idle_and_clean());

    // A capture that starts later lets the hit cover the blocks before it, and its rows still
    // equal a whole recompute.
    const std::vector<CaptureSpec> late_spec = {CaptureSpec{.after_layers = 1, .begin = 10}};
    Harness late({}, {.num_blocks = 256, .block_size = 4}, capture_role(late_spec));
    late.submit("warm", prompt, params_max_tokens(4));
    ASSERT_TRUE(late.wait_for_ends(1));
    late.submit("hit", prompt, params_max_tokens(4));
    ASSERT_TRUE(late.wait_for_ends(1));
    EXPECT_EQ(late.scheduler().stats().prefix_hit_tokens, 8u);  // two blocks, before 10
    EXPECT_EQ(late.outputs["hit"].output_ids(), expected_greedy(prompt, 4));
    const std::vector<Rows> late_reference = recomputed(prompt, 4, late_spec);
    ASSERT_EQ(late_reference.size(), 1u);
    EXPECT_EQ(late_reference[0].size(), 14u + 3u);  // prompt positions 10..23, 3 decode inputs
    EXPECT_EQ(captured(late.outputs["hit"]), late_reference);
    EXPECT_EQ(captured(late.outputs["warm"]), late_reference);
}

TEST(ArCaptureTest, CapturesEqualARecomputeAfterChunkedPrefillAndPreemption) {
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(make_prompt(18 + i, 90 + i));
    // Chunks of 5 prompt tokens a step, few blocks: prompts are chunked and decodes preempt.
    Harness harness({.max_prefill_tokens = 5, .watermark_blocks = 0},
                    {.num_blocks = 24, .block_size = 4}, capture_role());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        harness.submit("r" + std::to_string(i), prompts[i], params_max_tokens(14));
    }
    ASSERT_TRUE(harness.wait_for_ends(prompts.size()));
    EXPECT_GT(harness.scheduler().stats().preemptions, 0u);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const RequestOutput& output = harness.outputs["r" + std::to_string(i)];
        ASSERT_FALSE(output.error.has_value()) << output.error->to_string();
        EXPECT_EQ(output.output_ids(), expected_greedy(prompts[i], 14)) << i;
        EXPECT_EQ(captured(output), recomputed(prompts[i], 14)) << i;
    }
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArCaptureTest, ExplicitPositionsAndTheDecodeOffsetReachTheModel) {
    const std::int64_t prompt_length = 9;
    const std::int64_t offset = -3;  // M-RoPE: an image's grid makes positions shorter
    at::Tensor positions = at::empty({3, prompt_length}, at::kLong);
    for (std::int64_t i = 0; i < prompt_length; ++i) {
        positions[0][i] = i < 4 ? i : 4;  // temporal: one frame for the "image" at 4..8
        positions[1][i] = i < 4 ? i : 4 + (i - 4) / 2;
        positions[2][i] = i < 4 ? i : 4 + (i - 4) % 2;
    }
    auto role = hook_role({.open = [&](const StagePayload& payload) -> Result<RequestSetup> {
        OMNI_TRY(RequestSetup setup, read_request_setup(payload));
        setup.positions = positions;
        setup.position_offset = offset;
        return setup;
    }});
    // Chunked prefill: each chunk takes its slice of the positions.
    Harness harness({.max_prefill_tokens = 4, .enable_prefix_cache = false},
                    {.num_blocks = 64, .block_size = 4}, std::move(role));
    harness.submit("p", make_prompt(prompt_length, 8), params_max_tokens(6));
    ASSERT_TRUE(harness.wait_for_ends(1));
    ASSERT_FALSE(harness.outputs["p"].error.has_value());
    const at::Tensor seen = harness.model().positions_seen("p");
    ASSERT_TRUE(seen.defined());
    // Prompt positions as given, then cache index + offset on every axis for the 5 decode inputs.
    at::Tensor expected = at::empty({3, prompt_length + 5}, at::kLong);
    expected.narrow(1, 0, prompt_length).copy_(positions);
    for (std::int64_t p = prompt_length; p < prompt_length + 5; ++p) {
        for (int a = 0; a < 3; ++a) expected[a][p] = p + offset;
    }
    EXPECT_TRUE(at::equal(seen, expected)) << seen << "\n" << expected;
}

TEST(ArCaptureTest, LayerInjectionsChangeTheirRowsFromTheirLayerOn) {
    // Adds 3 to position 2 after the first layer: captures after 0 layers do not see it, those
    // after 1 and 2 do at that row only, and the next tokens follow the changed cache.
    auto role = hook_role({.open = [](const StagePayload& payload) -> Result<RequestSetup> {
                               OMNI_TRY(RequestSetup setup, read_request_setup(payload));
                               setup.layer_injections.push_back(LayerRun{
                                   .after_layers = 1,
                                   .add = {.begin = 2, .values = at::full({1, kFakeHidden}, 3.0)}});
                               for (std::int32_t layers = 0; layers <= kFakeLayers; ++layers) {
                                   setup.captures.push_back(
                                       CaptureSpec{.after_layers = layers, .begin = 0, .end = 5});
                               }
                               return setup;
                           },
                           .add_to_result =
                               [](Map& data, const ArSequence& sequence) {
                                   List captures;
                                   for (const CaptureRows& capture : sequence.captures()) {
                                       captures.push_back(Value(*torch_bridge::from_torch(
                                           capture.rows().to(at::kFloat).contiguous())));
                                   }
                                   data.insert_or_assign("captures", Value(std::move(captures)));
                               }});
    Harness harness({}, {}, std::move(role));
    const auto prompt = make_prompt(5, 12);
    harness.submit("i", prompt, params_max_tokens(3));
    ASSERT_TRUE(harness.wait_for_ends(1));
    ASSERT_FALSE(harness.outputs["i"].error.has_value()) << harness.outputs["i"].error->to_string();
    const std::vector<Rows> rows = captured(harness.outputs["i"]);
    ASSERT_EQ(rows.size(), 3u);
    std::vector<std::int64_t> raw(prompt.begin(), prompt.end());
    for (std::int32_t layers = 0; layers <= kFakeLayers; ++layers) {
        for (std::int64_t p = 0; p < 5; ++p) {
            const float added = layers >= 1 && p == 2 ? 3.0F : 0.0F;
            EXPECT_EQ(rows[static_cast<std::size_t>(layers)][static_cast<std::size_t>(p)],
                      fake_capture(raw, p, layers, added))
                << layers << " " << p;
        }
    }
    std::vector<std::int32_t> changed = prompt;
    changed[2] += 3;
    EXPECT_EQ(harness.outputs["i"].output_ids(), expected_greedy(changed, 3));
}

}  // namespace
}  // namespace omnirt::engine::testing

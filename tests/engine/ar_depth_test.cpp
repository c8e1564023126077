// The in-engine depth decoder (FeedbackAR pattern, depth_model.h) with the FakeModel and a fake
// depth model whose codes depend on the main model's hidden state, its token and every earlier
// code: each frame's codes are generated in the step, batched over the step's sequences, and
// the role's feedback embedding made from them is the next position's input. A sequence gives
// the same frames alone and in a batch, greedy or seeded, and through preemption.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/ar_scheduler.h"
#include "engine/depth_model.h"
#include "engine/fake_model.h"
#include "engine/hook_role.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {

constexpr int kDepths = 3;
constexpr std::int64_t kCodes = 16;

// Logits peaked at one code per row: -|v - target|.
at::Tensor peaked(const std::vector<std::int64_t>& targets) {
    at::Tensor logits = at::empty({static_cast<std::int64_t>(targets.size()), kCodes}, at::kFloat);
    for (std::size_t r = 0; r < targets.size(); ++r) {
        for (std::int64_t v = 0; v < kCodes; ++v) {
            logits[static_cast<std::int64_t>(r)][v] = -static_cast<float>(std::abs(v - targets[r]));
        }
    }
    return logits;
}

// code_0 = (7 * token + hidden[1] (the position count)) % 16; code_d = (5 * code_{d-1} + 3 *
// state + d) % 16, where state sums the frame's inputs so far.
struct DepthRule {
    static std::int64_t first(std::int32_t token, std::int64_t positions) {
        return (7 * token + positions) % kCodes;
    }
    static std::int64_t next(std::int64_t previous, std::int64_t state, int depth) {
        return (5 * previous + 3 * state + depth) % kCodes;
    }
};

class FakeDepthModel final : public DepthModel {
  public:
    int num_codes() const override { return kDepths; }
    std::int64_t vocab_size(int) const override { return kCodes; }
    Result<at::Tensor> begin_frame(const at::Tensor& hidden,
                                   std::span<const std::int32_t> tokens) override {
        std::lock_guard lock(mutex_);
        if (!state_.empty()) return fail(ErrorCode::internal, "a frame was not ended");
        batch_sizes_.push_back(tokens.size());
        std::vector<std::int64_t> targets;
        for (std::size_t r = 0; r < tokens.size(); ++r) {
            const auto positions =
                static_cast<std::int64_t>(hidden[static_cast<std::int64_t>(r)][1].item<float>());
            state_.push_back(tokens[r] + positions);
            targets.push_back(DepthRule::first(tokens[r], positions));
        }
        return peaked(targets);
    }
    Result<at::Tensor> next(int depth, std::span<const std::int32_t> previous) override {
        std::lock_guard lock(mutex_);
        if (previous.size() != state_.size()) return fail(ErrorCode::internal, "rows changed");
        std::vector<std::int64_t> targets;
        for (std::size_t r = 0; r < previous.size(); ++r) {
            targets.push_back(DepthRule::next(previous[r], state_[r], depth));
            state_[r] += previous[r];
        }
        return peaked(targets);
    }
    void end_frame() override {
        std::lock_guard lock(mutex_);
        state_.clear();
    }
    std::size_t max_batch() const {
        std::lock_guard lock(mutex_);
        std::size_t most = 0;
        for (std::size_t size : batch_sizes_) most = std::max(most, size);
        return most;
    }

  private:
    mutable std::mutex mutex_;
    std::vector<std::int64_t> state_;  // per row, the frame's scratch ("KV") only
    std::vector<std::size_t> batch_sizes_;
};

// The role: the next position's input is (token + sum of codes) % 60, written as its
// embedding (the fake model reads a row's first element as the value at that position).
std::int64_t feedback_value(std::int32_t token, std::span<const std::int32_t> codes) {
    std::int64_t sum = token;
    for (std::int32_t code : codes) sum += code;
    return sum % 60;
}

std::unique_ptr<ArRole> feedback_role() {
    return hook_role({.feedback = [](ArSequence&, const TokenStep& step) -> Result<at::Tensor> {
        if (step.codes.size() != static_cast<std::size_t>(kDepths)) {
            return fail(ErrorCode::internal, "a frame without its codes");
        }
        return at::full({kFakeHidden}, static_cast<float>(feedback_value(step.token, step.codes)),
                        at::kFloat);
    }});
}

struct Frames {
    std::vector<std::int32_t> tokens;
    std::vector<std::vector<std::int32_t>> codes;
};

// What a greedy request gives without the engine.
Frames expected_frames(const std::vector<std::int32_t>& prompt, std::int64_t max_tokens) {
    std::vector<std::int64_t> history(prompt.begin(), prompt.end());
    Frames out;
    for (std::int64_t i = 0; i < max_tokens; ++i) {
        const std::int32_t token = next_token(history);
        const auto positions = static_cast<std::int64_t>(history.size());
        std::vector<std::int32_t> codes;
        std::int64_t state = token + positions;
        std::int64_t code = DepthRule::first(token, positions);
        codes.push_back(static_cast<std::int32_t>(code));
        for (int d = 1; d < kDepths; ++d) {
            const std::int64_t next = DepthRule::next(code, state, d);
            state += code;
            code = next;
            codes.push_back(static_cast<std::int32_t>(code));
        }
        out.tokens.push_back(token);
        out.codes.push_back(codes);
        history.push_back(feedback_value(token, codes));
    }
    return out;
}

std::vector<std::vector<std::int32_t>> result_codes(const RequestOutput& output) {
    std::vector<std::vector<std::int32_t>> rows;
    const Value* codes = output.result ? output.result->data.find("codes") : nullptr;
    if (codes == nullptr) return rows;
    const Tensor& tensor = codes->as_tensor();
    const auto* data = tensor.data_as<std::int32_t>();
    for (std::int64_t r = 0; r < tensor.shape()[0]; ++r) {
        rows.emplace_back(data + r * tensor.shape()[1] + 1, data + (r + 1) * tensor.shape()[1]);
    }
    return rows;
}

TEST(ArDepthTest, FramesFeedBackAndStreamWithTheirCodes) {
    auto depth = std::make_unique<FakeDepthModel>();
    Harness harness({.stream_targets = {"vocoder"}}, {}, feedback_role(), std::move(depth));
    const auto prompt = make_prompt(9, 5);
    harness.submit("t", prompt, params_max_tokens(12));
    ASSERT_TRUE(harness.wait_for_ends(1));
    const RequestOutput& output = harness.outputs["t"];
    ASSERT_FALSE(output.error.has_value()) << output.error->to_string();
    const Frames expected = expected_frames(prompt, 12);
    EXPECT_EQ(output.output_ids(), expected.tokens);
    EXPECT_NE(output.output_ids(), expected_greedy(prompt, 12));  // the feedback counts
    EXPECT_EQ(result_codes(output), expected.codes);
    // Every chunk carries its frame: the token, then the depth codes.
    ASSERT_EQ(output.target_chunks.at("vocoder").size(), 12u);
    for (std::size_t i = 0; i < 12; ++i) {
        const Value& chunk = output.target_chunks.at("vocoder")[i];
        std::vector<std::int32_t> frame = tensor_ids(*chunk.find("codes"));
        ASSERT_EQ(frame.size(), static_cast<std::size_t>(kDepths) + 1);
        EXPECT_EQ(frame[0], expected.tokens[i]);
        EXPECT_EQ(std::vector<std::int32_t>(frame.begin() + 1, frame.end()), expected.codes[i]);
    }
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

// Runs the requests together (`together`) or one after another; returns tokens and codes.
std::map<std::string, Frames> run(const std::vector<std::vector<std::int32_t>>& prompts,
                                  bool together, Value params, ArEngineConfig config,
                                  Harness::Config sizes, std::size_t* max_batch = nullptr,
                                  std::uint64_t* preemptions = nullptr) {
    auto depth = std::make_unique<FakeDepthModel>();
    FakeDepthModel* raw = depth.get();
    Harness harness(std::move(config), sizes, feedback_role(), std::move(depth));
    std::map<std::string, Frames> out;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        harness.submit("r" + std::to_string(i), prompts[i], params);
        if (!together) {
            EXPECT_TRUE(harness.wait_for_ends(1));
        }
    }
    if (together) {
        EXPECT_TRUE(harness.wait_for_ends(prompts.size()));
    }
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const RequestOutput& output = harness.outputs["r" + std::to_string(i)];
        EXPECT_FALSE(output.error.has_value()) << output.error->to_string();
        out["r" + std::to_string(i)] = Frames{output.output_ids(), result_codes(output)};
    }
    if (max_batch != nullptr) *max_batch = raw->max_batch();
    if (preemptions != nullptr) *preemptions = harness.scheduler().stats().preemptions;
    EXPECT_TRUE(harness.wait_idle_and_clean());
    return out;
}

TEST(ArDepthTest, AloneEqualsInABatchGreedyAndSeeded) {
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(make_prompt(6 + 3 * i, 40 + i));
    // Greedy: each request's frames are the reference's, alone or batched.
    std::size_t batched = 0;
    const auto alone = run(prompts, false, params_max_tokens(10), {}, {});
    const auto together = run(prompts, true, params_max_tokens(10), {}, {}, &batched);
    EXPECT_GT(batched, 1u);  // the depth model ran over several sequences at once
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const std::string id = "r" + std::to_string(i);
        const Frames expected = expected_frames(prompts[i], 10);
        EXPECT_EQ(alone.at(id).tokens, expected.tokens) << id;
        EXPECT_EQ(alone.at(id).codes, expected.codes) << id;
        EXPECT_EQ(together.at(id).tokens, expected.tokens) << id;
        EXPECT_EQ(together.at(id).codes, expected.codes) << id;
    }
    // Sampled codes (per-depth parameters, seeded requests): batching changes nothing either.
    const ArEngineConfig sampled{.depth_sampling = {SamplingParams{.temperature = 1.5}}};
    const Value seeded = Value(Map{{"max_tokens", Value(10)},
                                   {"seed", Value(1234)},
                                   {"sampling", Value(Map{{"temperature", Value(0)}})}});
    const auto sampled_alone = run(prompts, false, seeded, sampled, {});
    const auto sampled_together = run(prompts, true, seeded, sampled, {});
    bool differs_from_greedy = false;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const std::string id = "r" + std::to_string(i);
        EXPECT_EQ(sampled_alone.at(id).codes, sampled_together.at(id).codes) << id;
        EXPECT_EQ(sampled_alone.at(id).tokens, sampled_together.at(id).tokens) << id;
        differs_from_greedy =
            differs_from_greedy || sampled_alone.at(id).codes != alone.at(id).codes;
    }
    EXPECT_TRUE(differs_from_greedy);
}

TEST(ArDepthTest, FeedbackSurvivesPreemption) {
    // Few blocks: decodes preempt, and the recomputed positions take their feedback again.
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(make_prompt(10, 70 + i));
    std::uint64_t preemptions = 0;
    const auto out = run(prompts, true, params_max_tokens(20), {.watermark_blocks = 0},
                         {.num_blocks = 16, .block_size = 4}, nullptr, &preemptions);
    EXPECT_GT(preemptions, 0u);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const Frames expected = expected_frames(prompts[i], 20);
        EXPECT_EQ(out.at("r" + std::to_string(i)).tokens, expected.tokens) << i;
        EXPECT_EQ(out.at("r" + std::to_string(i)).codes, expected.codes) << i;
    }
}

TEST(ArDepthTest, AFailingFeedbackFailsItsRequestOnly) {
    auto depth = std::make_unique<FakeDepthModel>();
    Harness harness({}, {},
                    hook_role({.feedback = [](ArSequence& sequence,
                                              const TokenStep& step) -> Result<at::Tensor> {
                        if (sequence.request_id() == "bad") return at::zeros({kFakeHidden + 1});
                        return at::full({kFakeHidden},
                                        static_cast<float>(feedback_value(step.token, step.codes)),
                                        at::kFloat);
                    }}),
                    std::move(depth));
    harness.submit("bad", make_prompt(5, 1), params_max_tokens(4));
    harness.submit("good", make_prompt(5, 2), params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(2));
    ASSERT_TRUE(harness.outputs["bad"].error.has_value());
    EXPECT_NE(harness.outputs["bad"].error->message.find("feedback embedding must be"),
              std::string::npos)
        << harness.outputs["bad"].error->message;
    EXPECT_EQ(harness.outputs["good"].output_ids(), expected_frames(make_prompt(5, 2), 4).tokens);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

}  // namespace
}  // namespace omnirt::engine::testing

// ArScheduler hooks for the omni roles, with the FakeModel: BeforeForward (embedding
// injection, ThinkerModelRunner), FeedbackStrategy (FeedbackARModelRunner), hidden states to
// stream targets, and failures of hooks and of the model.
#include "engine/ar_scheduler.h"

#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <any>
#include <string>
#include <vector>

#include "engine/fake_model.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {

// Replaces the embedding of prompt position 0 with data.embed_value (the fake model reads the
// first element of an injected row as the token value at that position).
Status inject_first_position(ArSequence& sequence, SequenceInput& input) {
    const Value* value = sequence.input().data.find("embed_value");
    if (value == nullptr) return ok_status();
    if (!value->is_int()) return fail(ErrorCode::invalid_argument, "embed_value must be an int");
    if (input.start_position > 0) return ok_status();
    const auto rows = static_cast<std::int64_t>(input.tokens.size());
    at::Tensor embeds = at::zeros({rows, 1}, at::kFloat);
    embeds[0][0] = static_cast<float>(value->as_int());
    input.input_embeds = embeds;
    input.embed_mask.assign(input.tokens.size(), false);
    input.embed_mask[0] = true;
    // The hook's own state survives between calls.
    auto* calls = std::any_cast<int>(&sequence.hook_state());
    if (calls == nullptr) {
        sequence.hook_state() = 1;
    } else {
        ++*calls;
    }
    return ok_status();
}

TEST(ArSchedulerHooksTest, BeforeForwardInjectsEmbeddingsAndTheSaltKeepsThemApart) {
    Harness harness({.before_forward = inject_first_position}, {});
    const auto prompt = make_prompt(30, 9);
    auto with_first = [&](std::int32_t first) {
        auto modified = prompt;
        modified[0] = first;
        return modified;
    };
    // Same token ids, different injected embeddings: distinct salts, distinct outputs.
    harness.submit("image_a", prompt, params_max_tokens(12),
                   Map{{"embed_value", Value(5)}, {"cache_salt", Value("a")}});
    ASSERT_TRUE(harness.wait_for_ends(1));
    harness.submit("image_b", prompt, params_max_tokens(12),
                   Map{{"embed_value", Value(17)}, {"cache_salt", Value("b")}});
    harness.submit("plain", prompt, params_max_tokens(12));
    ASSERT_TRUE(harness.wait_for_ends(2));
    for (const char* id : {"image_a", "image_b", "plain"}) {
        ASSERT_FALSE(harness.outputs[id].error.has_value())
            << harness.outputs[id].error->to_string();
    }
    EXPECT_NE(expected_greedy(with_first(5), 12), expected_greedy(with_first(17), 12));
    EXPECT_EQ(harness.outputs["image_a"].output_ids(), expected_greedy(with_first(5), 12));
    EXPECT_EQ(harness.outputs["image_b"].output_ids(), expected_greedy(with_first(17), 12));
    EXPECT_EQ(harness.outputs["plain"].output_ids(), expected_greedy(prompt, 12));
    // The same salt again shares the cached prefix, and the output is still right.
    const std::uint64_t hits = harness.scheduler().stats().prefix_hit_tokens;
    harness.submit("image_a2", prompt, params_max_tokens(12),
                   Map{{"embed_value", Value(5)}, {"cache_salt", Value("a")}});
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["image_a2"].output_ids(), expected_greedy(with_first(5), 12));
    EXPECT_GT(harness.scheduler().stats().prefix_hit_tokens, hits);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerHooksTest, AFailingHookFailsItsRequestOnly) {
    Harness harness({.before_forward = inject_first_position}, {});
    harness.submit("bad", make_prompt(5, 1), params_max_tokens(4),
                   Map{{"embed_value", Value("x")}});
    harness.submit("good", make_prompt(5, 2), params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(2));
    ASSERT_TRUE(harness.outputs["bad"].error.has_value());
    EXPECT_NE(
        harness.outputs["bad"].error->message.find("before_forward: embed_value must be an int"),
        std::string::npos)
        << harness.outputs["bad"].error->message;
    EXPECT_EQ(harness.outputs["good"].output_ids(), expected_greedy(make_prompt(5, 2), 4));
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

// The feedback loop of a talker-like model: the token sampled at a step, plus one, is written
// into the model's buffer before the next step and changes its next-token rule.
class PlusOneFeedback final : public FeedbackStrategy {
  public:
    explicit PlusOneFeedback(FakeModel* model) : model_(model) {}
    Status write_buffers(std::span<ArSequence* const> sequences,
                         std::span<SequenceInput> inputs) override {
        EXPECT_EQ(sequences.size(), inputs.size());
        for (ArSequence* sequence : sequences) {
            const auto* last = std::any_cast<std::int64_t>(&sequence->feedback());
            model_->set_feedback(sequence->request_id(), last == nullptr ? 0 : *last);
        }
        return ok_status();
    }
    Result<std::vector<StepFeedback>> extract_output(
        const ForwardOutput& output, std::span<const std::int64_t> rows,
        std::span<ArSequence* const> sequences, std::span<const std::int32_t> sampled) override {
        std::vector<StepFeedback> out;
        for (std::size_t i = 0; i < sequences.size(); ++i) {
            EXPECT_LT(rows[i], output.logits.size(0));
            const std::int64_t next = sampled[i] + 1;
            out.push_back(StepFeedback{.state = next, .chunk = Map{{"codes", Value(next)}}});
        }
        return out;
    }

  private:
    FakeModel* model_;
};

std::vector<std::int32_t> expected_with_feedback(const std::vector<std::int32_t>& prompt,
                                                 std::int64_t max_tokens) {
    std::vector<std::int64_t> history(prompt.begin(), prompt.end());
    std::vector<std::int32_t> out;
    std::int64_t feedback = 0;
    for (std::int64_t i = 0; i < max_tokens; ++i) {
        const std::int32_t token = next_token(history, feedback);
        out.push_back(token);
        history.push_back(token);
        feedback = token + 1;
    }
    return out;
}

TEST(ArSchedulerHooksTest, FeedbackStrategyClosesTheLoop) {
    // The strategy needs the model, which the harness creates: build the scheduler here.
    auto model = std::make_unique<FakeModel>(128, 4);
    FakeModel* raw = model.get();
    auto created = ArScheduler::create({.stage_name = "talker",
                                        .num_kv_blocks = 128,
                                        .block_size = 4,
                                        .enable_prefix_cache = false,
                                        .feedback = std::make_unique<PlusOneFeedback>(raw)},
                                       std::move(model));
    ASSERT_TRUE(created.has_value());
    ArScheduler& scheduler = **created;
    ASSERT_TRUE(scheduler.start().has_value());
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 3; ++i) {
        prompts.push_back(make_prompt(8 + i, 300 + i));
        StagePayload payload{
            .request_id = "t" + std::to_string(i),
            .request = OmniRequest{.params = params_max_tokens(15)},
            .data = Value(Map{{"input_ids", Value(Tensor::from_vector(prompts.back()))}})};
        ASSERT_TRUE(scheduler.inbox().push(pipeline::IncomingMessage{
            .request_id = payload.request_id,
            .kind = pipeline::IncomingKind::new_request,
            .payload = std::make_shared<const StagePayload>(std::move(payload))}));
    }
    std::map<std::string, std::vector<std::int64_t>> codes;
    std::map<std::string, std::vector<std::int32_t>> outputs;
    for (int ended = 0; ended < 3;) {
        auto message = scheduler.outbox().pop();
        ASSERT_TRUE(message.has_value());
        if (message->kind == pipeline::OutgoingKind::stream) {
            codes[message->request_id].push_back(message->chunk->chunk.find("codes")->as_int());
        } else {
            ASSERT_EQ(message->kind, pipeline::OutgoingKind::result) << message->error.to_string();
            outputs[message->request_id] = tensor_ids(*message->result->data.find("output_ids"));
            ++ended;
        }
    }
    for (int i = 0; i < 3; ++i) {
        const std::string id = "t" + std::to_string(i);
        const auto expected = expected_with_feedback(prompts[static_cast<std::size_t>(i)], 15);
        EXPECT_EQ(outputs[id], expected);
        EXPECT_NE(outputs[id], expected_greedy(prompts[static_cast<std::size_t>(i)], 15));
        ASSERT_EQ(codes[id].size(), 15u);
        for (std::size_t k = 0; k < 15; ++k) EXPECT_EQ(codes[id][k], expected[k] + 1);
    }
    scheduler.stop();
}

TEST(ArSchedulerHooksTest, HiddenStatesGoToStreamTargetsOnly) {
    Harness harness({.stream_targets = {"talker"}, .stream_hidden = true}, {});
    const auto prompt = make_prompt(7, 11);
    harness.submit("h", prompt, params_max_tokens(5));
    ASSERT_TRUE(harness.wait_for_ends(1));
    const RequestOutput& output = harness.outputs["h"];
    const auto expected = expected_greedy(prompt, 5);
    ASSERT_EQ(output.client_chunks.size(), 5u);
    ASSERT_EQ(output.target_chunks.at("talker").size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(output.client_chunks[i].find("hidden"), nullptr);
        const Value& chunk = output.target_chunks.at("talker")[i];
        EXPECT_EQ(chunk.find("token_id")->as_int(), expected[i]);
        const Tensor& hidden = chunk.find("hidden")->as_tensor();
        ASSERT_EQ(hidden.shape(), (Shape{4}));
        // The fake model's hidden row holds the token it predicted and the positions it saw.
        EXPECT_EQ(hidden.data_as<float>()[0], static_cast<float>(expected[i]));
        EXPECT_EQ(hidden.data_as<float>()[1], static_cast<float>(prompt.size() + i));
    }
    // No client stream when the stage does not talk to the client.
    Harness quiet({.stream_to_client = false, .stream_targets = {"talker"}}, {});
    quiet.submit("q", prompt, params_max_tokens(3));
    ASSERT_TRUE(quiet.wait_for_ends(1));
    EXPECT_TRUE(quiet.outputs["q"].client_chunks.empty());
    EXPECT_EQ(quiet.outputs["q"].target_chunks.at("talker").size(), 3u);
    EXPECT_EQ(quiet.outputs["q"].target_chunks.at("talker")[0].find("hidden"), nullptr);
}

TEST(ArSchedulerHooksTest, StreamTargetsChosenPerRequest) {
    // Like a thinker that streams to its talker only the requests that want audio.
    auto choose = [](const StagePayload& payload) -> Result<std::vector<std::string>> {
        const Value* wanted = payload.data.find("targets");
        if (wanted == nullptr) return std::vector<std::string>{};
        if (!wanted->is_string()) return fail(ErrorCode::invalid_argument, "targets: a string");
        if (wanted->as_string().empty()) return std::vector<std::string>{"talker"};
        return std::vector<std::string>{wanted->as_string()};
    };
    Harness harness({.stream_targets = {"talker", "other"},
                     .stream_targets_for = choose,
                     .stream_hidden = true},
                    {});
    const auto prompt = make_prompt(6, 12);
    harness.submit("audio", prompt, params_max_tokens(4), Map{{"targets", Value("")}});
    harness.submit("text", prompt, params_max_tokens(4));
    harness.submit("unknown", prompt, params_max_tokens(4), Map{{"targets", Value("vocoder")}});
    harness.submit("bad", prompt, params_max_tokens(4), Map{{"targets", Value(3)}});
    ASSERT_TRUE(harness.wait_for_ends(4));
    const RequestOutput& audio = harness.outputs["audio"];
    EXPECT_EQ(audio.output_ids(), expected_greedy(prompt, 4));
    ASSERT_EQ(audio.target_chunks.size(), 1u);
    ASSERT_EQ(audio.target_chunks.at("talker").size(), 4u);
    EXPECT_NE(audio.target_chunks.at("talker")[0].find("hidden"), nullptr);
    const RequestOutput& text = harness.outputs["text"];
    EXPECT_EQ(text.output_ids(), expected_greedy(prompt, 4));
    EXPECT_EQ(text.client_chunks.size(), 4u);
    EXPECT_TRUE(text.target_chunks.empty());
    ASSERT_TRUE(harness.outputs["unknown"].error.has_value());
    EXPECT_NE(harness.outputs["unknown"].error->message.find(
                  "stream_targets_for chose 'vocoder', which is not among"),
              std::string::npos)
        << harness.outputs["unknown"].error->message;
    ASSERT_TRUE(harness.outputs["bad"].error.has_value());
    EXPECT_NE(harness.outputs["bad"].error->message.find("stream_targets_for: targets: a string"),
              std::string::npos)
        << harness.outputs["bad"].error->message;
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerHooksTest, AFailedForwardFailsItsStepAndFreesTheBlocks) {
    Harness harness({.enable_prefix_cache = false}, {.num_blocks = 64, .block_size = 4});
    harness.model().fail_next_forward();
    harness.submit("a", make_prompt(5, 1), params_max_tokens(4));
    harness.submit("b", make_prompt(5, 2), params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(2));
    for (const char* id : {"a", "b"}) {
        // Both were in the first step unless "b" arrived after it started.
        if (harness.outputs[id].error) {
            EXPECT_NE(harness.outputs[id].error->message.find("model forward: fake model failure"),
                      std::string::npos);
        }
    }
    ASSERT_TRUE(harness.outputs["a"].error.has_value());
    ASSERT_TRUE(harness.wait_idle_and_clean());
    EXPECT_EQ(harness.scheduler().stats().free_blocks, 64u);
    // The engine keeps serving.
    harness.submit("c", make_prompt(5, 3), params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["c"].output_ids(), expected_greedy(make_prompt(5, 3), 4));
}

}  // namespace
}  // namespace omnirt::engine::testing

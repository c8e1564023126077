// The ArRole seam with the FakeModel: content handed over in RequestSetup (embeddings at
// placeholder positions, keyed by content in the prefix cache), prepare_step and its rules,
// typed per-request state, hidden states to stream targets, per-request stream targets, and
// failures of the role and of the model.
#include "engine/ar_scheduler.h"

#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/fake_model.h"
#include "engine/hook_role.h"
#include "engine/scheduler_harness.h"

namespace omnirt::engine::testing {
namespace {

// Like a thinker's media: data.embed_value (an int) is an "image" whose one embedding row
// replaces prompt position 0 (the fake model reads a row's first element as the value there).
Result<RequestSetup> image_at_first_position(const StagePayload& payload) {
    OMNI_TRY(RequestSetup setup, read_request_setup(payload));
    const Value* value = payload.data.find("embed_value");
    if (value == nullptr) return setup;
    if (!value->is_int()) return fail(ErrorCode::invalid_argument, "embed_value must be an int");
    setup.embeddings.push_back(PositionRun{
        .begin = 0,
        .values = at::full({1, kFakeHidden}, static_cast<float>(value->as_int()), at::kFloat)});
    return setup;
}

std::vector<std::int32_t> with_first(std::vector<std::int32_t> prompt, std::int32_t first) {
    prompt[0] = first;
    return prompt;
}

TEST(ArSchedulerHooksTest, DifferentMediaAtTheSamePlaceholdersNeverShareThePrefixCache) {
    Harness harness({}, {}, hook_role({.open = image_at_first_position}));
    const auto prompt = make_prompt(30, 9);  // position 0 holds the placeholder id
    harness.submit("image_a", prompt, params_max_tokens(12), Map{{"embed_value", Value(5)}});
    ASSERT_TRUE(harness.wait_for_ends(1));
    // No salt: the same ids with other media (or none) must still get their own KV.
    harness.submit("image_b", prompt, params_max_tokens(12), Map{{"embed_value", Value(17)}});
    ASSERT_TRUE(harness.wait_for_ends(1));
    harness.submit("plain", prompt, params_max_tokens(12));
    ASSERT_TRUE(harness.wait_for_ends(1));
    for (const char* id : {"image_a", "image_b", "plain"}) {
        ASSERT_FALSE(harness.outputs[id].error.has_value())
            << harness.outputs[id].error->to_string();
    }
    ASSERT_NE(expected_greedy(with_first(prompt, 5), 12),
              expected_greedy(with_first(prompt, 17), 12));
    EXPECT_EQ(harness.outputs["image_a"].output_ids(), expected_greedy(with_first(prompt, 5), 12));
    EXPECT_EQ(harness.outputs["image_b"].output_ids(), expected_greedy(with_first(prompt, 17), 12));
    EXPECT_EQ(harness.outputs["plain"].output_ids(), expected_greedy(prompt, 12));
    EXPECT_EQ(harness.scheduler().stats().prefix_hit_tokens, 0u);
    // The same image again shares the cached prefix, and the output is still right.
    harness.submit("image_a2", prompt, params_max_tokens(12), Map{{"embed_value", Value(5)}});
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(harness.outputs["image_a2"].output_ids(), expected_greedy(with_first(prompt, 5), 12));
    EXPECT_GT(harness.scheduler().stats().prefix_hit_tokens, 0u);
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

TEST(ArSchedulerHooksTest, MalformedSetupContentFailsItsRequestWithAClearError) {
    auto bad_setup = [](const StagePayload& payload) -> Result<RequestSetup> {
        OMNI_TRY(RequestSetup setup, read_request_setup(payload));
        const std::string kind = payload.data.find("kind")->as_string();
        if (kind == "outside") {
            setup.embeddings.push_back(
                PositionRun{.begin = 3, .values = at::zeros({4, kFakeHidden})});
        } else if (kind == "width") {
            setup.embeddings.push_back(PositionRun{.begin = 0, .values = at::zeros({1, 3})});
        } else if (kind == "overlap") {
            setup.embeddings.push_back(PositionRun{.begin = 0, .values = at::zeros({2, 4})});
            setup.embeddings.push_back(PositionRun{.begin = 1, .values = at::zeros({1, 4})});
        } else if (kind == "layer") {
            setup.layer_injections.push_back(
                LayerRun{.after_layers = kFakeLayers + 1,
                         .add = {.begin = 0, .values = at::zeros({1, kFakeHidden})}});
        } else if (kind == "positions") {
            setup.positions = at::zeros({4, 5}, at::kLong);  // 4 axes, the model takes 3
        } else if (kind == "offset") {
            setup.position_offset = 3;
        } else if (kind == "capture") {
            setup.captures.push_back(CaptureSpec{.after_layers = 0, .begin = 4, .end = 2});
        } else if (kind == "vocabulary") {
            setup.prompt[2] = 9999;  // not replaced by an embedding
        }
        return setup;
    };
    Harness harness({}, {}, hook_role({.open = bad_setup}));
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"outside", "outside the prompt"},
        {"width", "values must be a floating"},
        {"overlap", "two runs replace position"},
        {"layer", "after_layers 3 is outside"},
        {"positions", "positions must be"},
        {"offset", "position_offset needs"},
        {"capture", "captures:"},
        {"vocabulary", "outside the vocabulary"}};
    for (const auto& [kind, message] : cases) {
        harness.submit(kind, make_prompt(5, 3), params_max_tokens(2), Map{{"kind", Value(kind)}});
    }
    ASSERT_TRUE(harness.wait_for_ends(cases.size()));
    for (const auto& [kind, message] : cases) {
        ASSERT_TRUE(harness.outputs[kind].error.has_value()) << kind;
        EXPECT_EQ(harness.outputs[kind].error->code, ErrorCode::invalid_argument) << kind;
        EXPECT_NE(harness.outputs[kind].error->message.find(message), std::string::npos)
            << kind << ": " << harness.outputs[kind].error->message;
    }
    EXPECT_TRUE(harness.wait_idle_and_clean());
}

// Writes data.embed_value at the step's first row: content the engine does not hold.
Status inject_in_step(ArSequence& sequence, SequenceInput& input) {
    const Value* value = sequence.input().data.find("embed_value");
    if (value == nullptr) return ok_status();
    if (!value->is_int()) return fail(ErrorCode::invalid_argument, "embed_value must be an int");
    input.embeddings = RowValues{
        .rows = {0},
        .values = at::full({1, kFakeHidden}, static_cast<float>(value->as_int()), at::kFloat)};
    return ok_status();
}

TEST(ArSchedulerHooksTest, PrepareStepContentNeedsThePrefixCacheOff) {
    Harness harness({}, {}, hook_role({.prepare = inject_in_step}));
    const auto prompt = make_prompt(6, 4);
    harness.submit("cached", prompt, params_max_tokens(3), Map{{"embed_value", Value(5)}});
    harness.submit("bad", prompt, params_max_tokens(3), Map{{"embed_value", Value("x")}});
    harness.submit("good", make_prompt(5, 2), params_max_tokens(4));
    ASSERT_TRUE(harness.wait_for_ends(3));
    ASSERT_TRUE(harness.outputs["cached"].error.has_value());
    EXPECT_EQ(harness.outputs["cached"].error->code, ErrorCode::failed_precondition);
    EXPECT_NE(harness.outputs["cached"].error->message.find("RequestSetup::prefix_cache"),
              std::string::npos);
    ASSERT_TRUE(harness.outputs["bad"].error.has_value());
    EXPECT_NE(
        harness.outputs["bad"].error->message.find("prepare_step: embed_value must be an int"),
        std::string::npos)
        << harness.outputs["bad"].error->message;
    EXPECT_EQ(harness.outputs["good"].output_ids(), expected_greedy(make_prompt(5, 2), 4));
    EXPECT_TRUE(harness.wait_idle_and_clean());

    // With the cache off for the request, the step's content counts.
    auto no_cache = [](const StagePayload& payload) -> Result<RequestSetup> {
        OMNI_TRY(RequestSetup setup, read_request_setup(payload));
        setup.prefix_cache = false;
        return setup;
    };
    Harness allowed({}, {}, hook_role({.open = no_cache, .prepare = inject_in_step}));
    allowed.submit("cached", prompt, params_max_tokens(3), Map{{"embed_value", Value(5)}});
    ASSERT_TRUE(allowed.wait_for_ends(1));
    ASSERT_FALSE(allowed.outputs["cached"].error.has_value());
    std::vector<std::int64_t> history(prompt.begin(), prompt.end());
    history[0] = 5;  // the first step's row 0
    EXPECT_EQ(allowed.outputs["cached"].output_ids()[0], next_token(history));
}

// Typed per-request state: created with the request, seen by every hook, closed once.
struct Counted final : RoleRequestState {
    explicit Counted(int* closes) : closes(closes) {}
    int* closes;
    int steps = 0;
};

TEST(ArSchedulerHooksTest, RoleStateIsTypedAndClosedOnceWhateverEndsTheRequest) {
    int closes = 0;
    int seen_steps = 0;
    Harness harness({}, {},
                    hook_role({.open = [&](const StagePayload& payload) -> Result<RequestSetup> {
                                   OMNI_TRY(RequestSetup setup, read_request_setup(payload));
                                   setup.state = std::make_unique<Counted>(&closes);
                                   return setup;
                               },
                               .prepare =
                                   [](ArSequence& sequence, SequenceInput&) {
                                       ++sequence.role_state<Counted>()->steps;
                                       return ok_status();
                                   },
                               .closed =
                                   [&](ArSequence& sequence) {
                                       Counted* state = sequence.role_state<Counted>();
                                       ASSERT_NE(state, nullptr);
                                       ++*state->closes;
                                       seen_steps += state->steps;
                                   }}));
    harness.submit("done", make_prompt(5, 1), params_max_tokens(3));
    ASSERT_TRUE(harness.wait_for_ends(1));
    EXPECT_EQ(closes, 1);
    EXPECT_EQ(seen_steps, 3);
    // Aborted while it waits for blocks or runs: closed once, and the runner's state too.
    harness.submit("aborted", make_prompt(5, 2), params_max_tokens(1000));
    ASSERT_TRUE(harness.wait_for_chunks("aborted", 1));
    harness.scheduler().abort("aborted");
    // (A snapshot from before the request arrived may still say idle: wait for the abort.)
    ASSERT_TRUE(harness.scheduler().wait_for_stats(
        [](const ArSchedulerStats& stats) {
            return stats.aborted_requests == 1 && stats.idle && stats.running == 0;
        },
        std::chrono::seconds(60)));
    ASSERT_TRUE(harness.wait_idle_and_clean());
    EXPECT_EQ(closes, 2);
    EXPECT_EQ(harness.model().open_requests(), 0u);
}

TEST(ArSchedulerHooksTest, HiddenStatesGoToStreamTargetsOnly) {
    Harness harness({.stream_targets = {"talker"}}, {},
                    hook_role({.text = {.stream_hidden = true}}));
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
    Harness harness({.stream_targets = {"talker", "other"}}, {},
                    hook_role({.text = {.stream_targets_for = choose, .stream_hidden = true}}));
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

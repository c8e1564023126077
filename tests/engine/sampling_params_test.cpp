#include "engine/sampling_params.h"

#include <gtest/gtest.h>

namespace omnirt::engine {
namespace {

Value params_with(Map top) { return Value(std::move(top)); }

TEST(SamplingParamsTest, LayersOverlayFieldByField) {
    const Value params = params_with(
        {{"sampling", Value(Map{{"temperature", Value(0.5)},
                                {"top_p", Value(0.9)},
                                {"seed", Value(7)},
                                {"top_k", Value(-1)}})},
         {"stage_sampling",
          Value(Map{{"thinker", Value(Map{{"temperature", Value(0.0)}, {"max_tokens", Value(9)}})},
                    {"talker", Value(Map{{"temperature", Value(1.3)}})}})},
         {"max_tokens", Value(100)},
         {"stop", Value(List{Value("###"), Value("")})},
         {"seed", Value(3)}});
    SamplingParams defaults;
    defaults.top_k = 50;
    defaults.repetition_penalty = 1.1;
    auto thinker = parse_sampling_params(params, "thinker", defaults);
    ASSERT_TRUE(thinker.has_value()) << thinker.error().to_string();
    EXPECT_EQ(thinker->temperature, 0.0);
    EXPECT_TRUE(thinker->greedy());
    EXPECT_EQ(thinker->top_p, 0.9);
    EXPECT_EQ(thinker->top_k, 0);  // -1 turns top_k off
    EXPECT_EQ(thinker->repetition_penalty, 1.1);
    EXPECT_EQ(thinker->seed, 7u);       // params.sampling.seed over params.seed
    EXPECT_EQ(thinker->max_tokens, 9);  // stage over top level
    EXPECT_EQ(thinker->stop, std::vector<std::string>{"###"});  // empty strings dropped

    auto talker = parse_sampling_params(params, "talker", defaults);
    ASSERT_TRUE(talker.has_value());
    EXPECT_EQ(talker->temperature, 1.3);
    EXPECT_EQ(talker->max_tokens, 100);
    auto other = parse_sampling_params(params, "decode", defaults);
    ASSERT_TRUE(other.has_value());
    EXPECT_EQ(other->temperature, 0.5);
}

TEST(SamplingParamsTest, TopLevelSeedAndDefaults) {
    auto parsed = parse_sampling_params(params_with({{"seed", Value(-5)}}), "s");
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed->seed, static_cast<std::uint64_t>(-5));
    EXPECT_EQ(parsed->temperature, 1.0);
    EXPECT_FALSE(parsed->max_tokens.has_value());
    EXPECT_FALSE(parsed->logprobs.has_value());
    auto empty = parse_sampling_params(Value(), "s");
    ASSERT_TRUE(empty.has_value());
    EXPECT_EQ(*empty, SamplingParams{});
}

TEST(SamplingParamsTest, EngineFields) {
    const Value params =
        params_with({{"sampling", Value(Map{{"stop_token_ids", Value(List{Value(3), Value(9)})},
                                            {"ignore_eos", Value(true)},
                                            {"min_tokens", Value(2)},
                                            {"logprobs", Value(true)},
                                            {"top_logprobs", Value(5)},
                                            {"stop", Value("end")},
                                            {"presence_penalty", Value(-1.5)},
                                            {"frequency_penalty", Value(2)},
                                            {"min_p", Value(0.05)}})}});
    auto parsed = parse_sampling_params(params, "s");
    ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
    EXPECT_EQ(parsed->stop_token_ids, (std::vector<std::int32_t>{3, 9}));
    EXPECT_TRUE(parsed->ignore_eos);
    EXPECT_EQ(parsed->min_tokens, 2);
    EXPECT_EQ(parsed->logprobs, 5);
    EXPECT_EQ(parsed->stop, std::vector<std::string>{"end"});
    EXPECT_EQ(parsed->presence_penalty, -1.5);
    EXPECT_EQ(parsed->frequency_penalty, 2.0);
    EXPECT_EQ(parsed->min_p, 0.05);
    EXPECT_TRUE(parsed->has_penalties());

    auto plain_logprobs = parse_sampling_params(
        params_with({{"sampling", Value(Map{{"logprobs", Value(true)}})}}), "s");
    ASSERT_TRUE(plain_logprobs.has_value());
    EXPECT_EQ(plain_logprobs->logprobs, 0);
}

struct BadCase {
    Map sampling;
    std::string message;
};

TEST(SamplingParamsTest, ErrorsNameTheField) {
    const std::vector<BadCase> cases = {
        {{{"temperature", Value(-0.1)}},
         "params.stage_sampling.thinker.temperature must be in [0, inf)"},
        {{{"temperature", Value("hot")}},
         "params.stage_sampling.thinker.temperature must be a number"},
        {{{"top_p", Value(0)}}, "params.stage_sampling.thinker.top_p must be in (0, 1]"},
        {{{"top_k", Value(-2)}}, "params.stage_sampling.thinker.top_k must be in [-1,"},
        {{{"top_k", Value(1.5)}}, "params.stage_sampling.thinker.top_k must be an integer"},
        {{{"min_p", Value(1.5)}}, "params.stage_sampling.thinker.min_p must be in [0, 1]"},
        {{{"repetition_penalty", Value(0)}}, "repetition_penalty must be in (0, inf)"},
        {{{"presence_penalty", Value(2.5)}}, "presence_penalty must be in [-2, 2]"},
        {{{"max_tokens", Value(-1)}}, "params.stage_sampling.thinker.max_tokens must be in [0,"},
        {{{"stop", Value(3)}}, "stop must be a string or a list of strings"},
        {{{"stop_token_ids", Value(List{Value(-1)})}}, "stop_token_ids must hold non-negative"},
        {{{"ignore_eos", Value(1)}}, "ignore_eos must be a bool"},
        {{{"logprobs", Value(21)}}, "logprobs must be a bool or an integer in [0, 20]"},
        {{{"seed", Value("x")}}, "seed must be an integer"},
        {{{"min_tokens", Value(5)}, {"max_tokens", Value(2)}},
         "min_tokens (5) exceeds max_tokens (2)"},
    };
    for (const BadCase& bad : cases) {
        const Value params =
            params_with({{"stage_sampling", Value(Map{{"thinker", Value(bad.sampling)}})}});
        auto parsed = parse_sampling_params(params, "thinker");
        ASSERT_FALSE(parsed.has_value()) << bad.message;
        EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(parsed.error().message.find(bad.message), std::string::npos)
            << parsed.error().message;
    }
    auto not_map = parse_sampling_params(params_with({{"sampling", Value(3)}}), "s");
    ASSERT_FALSE(not_map.has_value());
    EXPECT_NE(not_map.error().message.find("params.sampling must be a map"), std::string::npos);
    auto top_level = parse_sampling_params(params_with({{"max_tokens", Value("9")}}), "s");
    ASSERT_FALSE(top_level.has_value());
    EXPECT_NE(top_level.error().message.find("params.max_tokens must be an integer"),
              std::string::npos);
}

TEST(SamplingStateTest, HistoryAndRandomStream) {
    SamplingParams params;
    params.seed = 42;
    SamplingState state(params, 1);
    state.add_prompt(std::vector<std::int32_t>{5, 6, 5});
    state.add_output(6);
    state.add_output(9);
    state.add_output(9);
    EXPECT_EQ(state.seen_tokens(), (std::vector<std::int32_t>{5, 6, 9}));
    using Count = std::pair<std::int32_t, std::int32_t>;
    EXPECT_EQ(state.output_counts(), (std::vector<Count>{{6, 1}, {9, 2}}));
    EXPECT_EQ(state.output_count(), 3);

    SamplingState same(params, 999);  // the request's seed wins over the fallback
    SamplingState other(SamplingParams{}, 1);
    SamplingState other_again(SamplingParams{}, 1);
    for (int i = 0; i < 5; ++i) {
        const double u = state.next_uniform();
        EXPECT_GE(u, 0.0);
        EXPECT_LT(u, 1.0);
        EXPECT_EQ(u, same.next_uniform());
        EXPECT_EQ(other.next_uniform(), other_again.next_uniform());
    }
}

}  // namespace
}  // namespace omnirt::engine

// parse_ar_stage_args / parse_sampling_args: the factory args every AR-engine stage shares
// (s2_pro.tts, qwen3_omni.talker): family defaults, overrides, prefixed sampling args, and every
// bad value an invalid_argument naming the stage and the arg.
#include "engine/ar_stage_args.h"

#include <gtest/gtest.h>

namespace omnirt::engine {
namespace {

const ArStageArgDefaults kDefaults{
    .max_total_tokens = 16384,
    .max_prefill_tokens = 2048,
    .max_tokens_arg = "max_frames",
    .max_tokens = 4096,
    .sampling = {.temperature = 0.9, .top_k = 50, .top_p = 1.0, .repetition_penalty = 1.05}};

pipeline::StageContext context(Map args) {
    if (!args.contains("model_path")) args.emplace("model_path", Value("/models/x"));
    return pipeline::StageContext{.stage_name = "talker", .args = std::move(args)};
}

TEST(ArStageArgsTest, DefaultsComeFromTheFamily) {
    auto args = parse_ar_stage_args(context({}), "x.talker stage 'talker'", kDefaults);
    ASSERT_TRUE(args.has_value()) << args.error().to_string();
    EXPECT_EQ(args->model_path, "/models/x");
    EXPECT_EQ(args->dtype, DType::f32);
    EXPECT_EQ(args->block_size, 16);
    EXPECT_EQ(args->max_total_tokens, 16384);
    EXPECT_EQ(args->num_kv_blocks(), 1024);
    EXPECT_EQ(args->max_running_requests, 64);
    EXPECT_EQ(args->max_prefill_tokens, 2048);
    EXPECT_EQ(args->max_tokens, 4096);
    EXPECT_EQ(args->seed, 0u);
    EXPECT_EQ(args->load_format, "auto");
    EXPECT_EQ(args->dummy_seed, 0u);
    EXPECT_EQ(args->num_threads, 0);
    EXPECT_DOUBLE_EQ(args->sampling.temperature, 0.9);
    EXPECT_EQ(args->sampling.top_k, 50);
    EXPECT_DOUBLE_EQ(args->sampling.repetition_penalty, 1.05);
    EXPECT_EQ(args->sampling.max_tokens, 4096);
}

TEST(ArStageArgsTest, OverridesAndPrefixedSampling) {
    auto ctx = context({{"dtype", Value("bfloat16")},
                        {"block_size", Value(32)},
                        {"max_total_tokens", Value(64)},
                        {"max_frames", Value(10)},
                        {"seed", Value(7)},
                        {"load_format", Value("dummy")},
                        {"dummy_seed", Value(3)},
                        {"temperature", Value(0.0)},
                        {"depth_top_k", Value(5)}});
    auto args = parse_ar_stage_args(ctx, "who", kDefaults);
    ASSERT_TRUE(args.has_value()) << args.error().to_string();
    EXPECT_EQ(args->dtype, DType::bf16);
    EXPECT_EQ(args->num_kv_blocks(), 2);
    EXPECT_EQ(args->sampling.max_tokens, 10);
    EXPECT_EQ(args->seed, 7u);
    EXPECT_EQ(args->dummy_seed, 3u);
    EXPECT_TRUE(args->sampling.greedy());
    auto depth = parse_sampling_args(ctx, "who", "depth_", {.temperature = 0.8}, 10);
    ASSERT_TRUE(depth.has_value());
    EXPECT_EQ(depth->top_k, 5);
    EXPECT_DOUBLE_EQ(depth->temperature, 0.8);
    EXPECT_DOUBLE_EQ(depth->repetition_penalty, 1.0);  // not read without a default
}

TEST(ArStageArgsTest, BadValuesNameTheStageAndTheArg) {
    const std::vector<std::pair<Map, std::string>> cases = {
        {{{"model_path", Value("")}}, "arg 'model_path' is required"},
        {{{"dtype", Value("float16")}}, "arg 'dtype' must be float32 or bfloat16"},
        {{{"dtype", Value(3)}}, "dtype"},
        {{{"block_size", Value(0)}}, "block_size"},
        {{{"block_size", Value(64)}, {"max_total_tokens", Value(32)}}, "max_total_tokens"},
        {{{"max_running_requests", Value(5000)}}, "max_running_requests"},
        {{{"max_frames", Value(0)}}, "max_frames"},
        {{{"dummy_seed", Value(-1)}}, "dummy_seed"},
        {{{"num_threads", Value(2000)}}, "num_threads"},
        {{{"top_k", Value(-2)}}, "top_k"},
        {{{"temperature", Value("hot")}}, "temperature"},
        {{{"top_p", Value(0.0)}}, "top_p"},
    };
    for (const auto& [args, needle] : cases) {
        auto parsed = parse_ar_stage_args(context(args), "x.talker stage 'talker'", kDefaults);
        ASSERT_FALSE(parsed.has_value()) << needle;
        EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument) << needle;
        EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
    }
}

}  // namespace
}  // namespace omnirt::engine

// Qwen3Model over a paged KV cache: agreement with an independent dense forward, KV-cached
// decode vs full recomputation, chunked prefill, batching, block order, the embedding hook,
// the hidden-state output, weight and batch errors, and bf16.
#include "models/qwen3/qwen3_model.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/kv_cache.h"
#include "models/qwen3_test_support.h"

namespace omnirt::models::qwen3 {
namespace {

using engine::ForwardOutput;
using engine::KVCache;
using engine::SequenceInput;
using testing::block_range;
using testing::expect_close;
using testing::make_cache;
using testing::make_model;
using testing::random_weights;
using testing::reference_forward;
using testing::sequence_input;
using testing::slice;
using testing::tiny_config;
using testing::token_ids;

constexpr double kTolerance = 1e-4;  // relative, float32

ForwardOutput run(Qwen3Model& model, KVCache& cache, std::vector<SequenceInput> batch) {
    auto output = model.forward(batch, cache);
    OMNI_CHECK(output.has_value(), output.has_value() ? "" : output.error().to_string());
    return std::move(*output);
}

// Logits of the last token after prefilling `tokens` in one step into a fresh cache.
at::Tensor full_prefill_logits(Qwen3Model& model, const std::vector<std::int32_t>& tokens) {
    auto cache = make_cache(model, 16, 8);
    const auto blocks = static_cast<std::int32_t>((tokens.size() + 7) / 8);
    return run(model, *cache, {sequence_input("full", tokens, 0, block_range(0, blocks))}).logits;
}

class Qwen3ModelTest : public ::testing::TestWithParam<bool> {  // param: MoE
  protected:
    Qwen3ModelTest()
        : config_(tiny_config(GetParam())),
          weights_(random_weights(config_, 7)),
          model_(make_model(config_, weights_)) {}

    Qwen3Config config_;
    testing::WeightMap weights_;
    std::unique_ptr<Qwen3Model> model_;
};

TEST_P(Qwen3ModelTest, PrefillMatchesTheDenseReference) {
    const auto tokens = token_ids(13, config_.vocab_size, 1);
    const at::Tensor expected = reference_forward(config_, weights_, tokens);
    auto cache = make_cache(*model_, 8, 4);
    const ForwardOutput output =
        run(*model_, *cache, {sequence_input("a", tokens, 0, block_range(0, 4))});
    ASSERT_EQ(output.logits.sizes(), (at::IntArrayRef{1, config_.vocab_size}));
    EXPECT_EQ(output.logits.scalar_type(), at::kFloat);
    EXPECT_FALSE(output.hidden.defined());
    expect_close(output.logits[0], expected[12], kTolerance);
}

TEST_P(Qwen3ModelTest, CachedDecodeMatchesFullRecomputation) {
    const auto tokens = token_ids(16, config_.vocab_size, 2);
    const at::Tensor expected = reference_forward(config_, weights_, tokens);
    auto cache = make_cache(*model_, 8, 4);
    const auto blocks = block_range(0, 4);
    run(*model_, *cache, {sequence_input("a", slice(tokens, 0, 5), 0, blocks)});
    for (std::size_t position = 5; position < tokens.size(); ++position) {
        const ForwardOutput step = run(
            *model_, *cache,
            {sequence_input("a", {tokens[position]}, static_cast<std::int64_t>(position), blocks)});
        const auto prefix = slice(tokens, 0, position + 1);
        expect_close(step.logits[0], full_prefill_logits(*model_, prefix)[0], kTolerance,
                     "position " + std::to_string(position));
        expect_close(step.logits[0], expected[static_cast<std::int64_t>(position)], kTolerance,
                     "reference, position " + std::to_string(position));
    }
}

TEST_P(Qwen3ModelTest, ChunkedPrefillMatchesOnePrefill) {
    const auto tokens = token_ids(23, config_.vocab_size, 3);
    const at::Tensor whole = full_prefill_logits(*model_, tokens);
    for (const std::vector<std::size_t>& chunks :
         {std::vector<std::size_t>{8, 8, 7}, {1, 22}, {5, 3, 1, 9, 5}, {4, 4, 4, 4, 4, 3}}) {
        auto cache = make_cache(*model_, 8, 4);
        const auto blocks = block_range(0, 6);
        std::size_t begin = 0;
        at::Tensor last;
        for (std::size_t size : chunks) {
            last = run(*model_, *cache,
                       {sequence_input("a", slice(tokens, begin, begin + size),
                                       static_cast<std::int64_t>(begin), blocks)})
                       .logits;
            begin += size;
        }
        ASSERT_EQ(begin, tokens.size());
        expect_close(last, whole, kTolerance);
    }
}

TEST_P(Qwen3ModelTest, SequenceAloneEqualsSequenceInABatch) {
    // a: decode after a 9-token prefix; b: a 6-token prefill chunk after 3 cached; c: a fresh
    // 11-token prefill; d: a first token.
    const auto a = token_ids(10, config_.vocab_size, 4);
    const auto b = token_ids(9, config_.vocab_size, 5);
    const auto c = token_ids(11, config_.vocab_size, 6);
    const auto d = token_ids(1, config_.vocab_size, 7);
    auto cache = make_cache(*model_, 32, 4);
    // Blocks: a 0-2, b 3-5, c 6-8, d 9.
    run(*model_, *cache,
        {sequence_input("a", slice(a, 0, 9), 0, block_range(0, 3)),
         sequence_input("b", slice(b, 0, 3), 0, block_range(3, 3))});
    const std::vector<SequenceInput> batch = {
        sequence_input("a", {a[9]}, 9, block_range(0, 3)),
        sequence_input("b", slice(b, 3, 9), 3, block_range(3, 3)),
        sequence_input("c", c, 0, block_range(6, 3)),
        sequence_input("d", d, 0, block_range(9, 1)),
    };
    const ForwardOutput together = run(*model_, *cache, batch);
    ASSERT_EQ(together.logits.size(0), 4);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        // Alone, re-running the same step overwrites the same slots with the same values.
        const ForwardOutput alone = run(*model_, *cache, {batch[i]});
        expect_close(together.logits[static_cast<std::int64_t>(i)], alone.logits[0], kTolerance,
                     batch[i].request_id);
    }
    expect_close(together.logits[0], full_prefill_logits(*model_, a)[0], kTolerance, "a");
    expect_close(together.logits[1], full_prefill_logits(*model_, b)[0], kTolerance, "b");
    expect_close(together.logits[2], full_prefill_logits(*model_, c)[0], kTolerance, "c");
}

// logit_rows: the head computes those rows only (the full head's values there), -inf elsewhere.
TEST_P(Qwen3ModelTest, LogitRowsComputeOnlyThoseRows) {
    const std::vector<std::int64_t> rows = {1, 2, 5, config_.vocab_size - 1};
    auto restricted = Qwen3Model::create(config_, testing::lookup_of(weights_),
                                         {.dtype = at::kFloat, .logit_rows = rows});
    ASSERT_TRUE(restricted.has_value()) << restricted.error().to_string();
    const auto tokens = token_ids(7, config_.vocab_size, 3);
    const at::Tensor full = full_prefill_logits(*model_, tokens);
    const at::Tensor some = full_prefill_logits(**restricted, tokens);
    ASSERT_EQ(some.sizes(), full.sizes());
    const at::Tensor ids = at::tensor(rows, at::kLong);
    expect_close(some[0].index_select(0, ids), full[0].index_select(0, ids), kTolerance);
    at::Tensor others = at::ones({config_.vocab_size}, at::kBool);
    others.index_fill_(0, ids, false);
    EXPECT_TRUE(at::all(at::isinf(some[0].masked_select(others))).item<bool>());
    EXPECT_TRUE(at::all(some[0].masked_select(others) < 0).item<bool>());
    for (const std::vector<std::int64_t>& bad :
         std::vector<std::vector<std::int64_t>>{{2, 1}, {1, 1}, {-1, 3}, {0, config_.vocab_size}}) {
        auto refused = Qwen3Model::create(config_, testing::lookup_of(weights_),
                                          {.dtype = at::kFloat, .logit_rows = bad});
        ASSERT_FALSE(refused.has_value());
        EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(refused.error().message.find("logit_rows"), std::string::npos);
    }
}

// The batched gathered attention (what CUDA runs) gives the CPU kernel's logits for a batch of
// decode, prefill chunk and fresh prefill rows.
TEST_P(Qwen3ModelTest, GatheredAttentionPathEqualsTheCpuKernel) {
    auto gathered = Qwen3Model::create(config_, testing::lookup_of(weights_),
                                       {.dtype = at::kFloat, .gathered_attention = true});
    ASSERT_TRUE(gathered.has_value()) << gathered.error().to_string();
    const auto a = token_ids(10, config_.vocab_size, 4);
    const auto b = token_ids(9, config_.vocab_size, 5);
    const auto c = token_ids(11, config_.vocab_size, 6);
    const std::vector<SequenceInput> prefix = {
        sequence_input("a", slice(a, 0, 9), 0, block_range(0, 3)),
        sequence_input("b", slice(b, 0, 3), 0, block_range(3, 3))};
    const std::vector<SequenceInput> step = {
        sequence_input("a", {a[9]}, 9, block_range(0, 3)),
        sequence_input("b", slice(b, 3, 9), 3, block_range(3, 3)),
        sequence_input("c", c, 0, block_range(6, 3))};
    auto kernel_cache = make_cache(*model_, 16, 4);
    auto gathered_cache = make_cache(**gathered, 16, 4);
    const ForwardOutput kernel_prefix = run(*model_, *kernel_cache, prefix);
    const ForwardOutput gathered_prefix = run(**gathered, *gathered_cache, prefix);
    const ForwardOutput kernel_step = run(*model_, *kernel_cache, step);
    const ForwardOutput gathered_step = run(**gathered, *gathered_cache, step);
    for (std::int64_t i = 0; i < 2; ++i) {
        expect_close(gathered_prefix.logits[i], kernel_prefix.logits[i], kTolerance, "prefix");
    }
    for (std::int64_t i = 0; i < 3; ++i) {
        expect_close(gathered_step.logits[i], kernel_step.logits[i], kTolerance, "step");
    }
}

TEST_P(Qwen3ModelTest, BlockOrderDoesNotMatter) {
    const auto first = token_ids(14, config_.vocab_size, 8);
    const auto second = token_ids(9, config_.vocab_size, 9);
    auto run_with = [&](std::vector<std::int32_t> blocks_first,
                        std::vector<std::int32_t> blocks_second) {
        auto cache = make_cache(*model_, 24, 3);
        run(*model_, *cache,
            {sequence_input("x", slice(first, 0, 10), 0, blocks_first),
             sequence_input("y", slice(second, 0, 5), 0, blocks_second)});
        return run(*model_, *cache,
                   {sequence_input("x", slice(first, 10, 14), 10, blocks_first),
                    sequence_input("y", slice(second, 5, 9), 5, blocks_second)})
            .logits;
    };
    const at::Tensor in_order = run_with(block_range(0, 5), block_range(5, 3));
    std::vector<std::int32_t> all = block_range(0, 24);
    std::mt19937 shuffle_seed(11);
    for (int round = 0; round < 3; ++round) {
        std::shuffle(all.begin(), all.end(), shuffle_seed);
        const at::Tensor shuffled = run_with(slice(all, 0, 5), slice(all, 5, 8));
        expect_close(shuffled, in_order, kTolerance, "round " + std::to_string(round));
    }
}

TEST_P(Qwen3ModelTest, InjectedEmbeddingRowEqualsItsToken) {
    const auto tokens = token_ids(7, config_.vocab_size, 10);
    const at::Tensor expected = full_prefill_logits(*model_, tokens);
    // Positions 2 and 5 hold a placeholder id; their embeddings come from input.embeddings.
    auto placeholder = tokens;
    placeholder[2] = 0;
    placeholder[5] = 0;
    SequenceInput input = sequence_input("mm", placeholder, 0, block_range(0, 1));
    at::Tensor embeds = at::empty({2, config_.hidden_size});
    const at::Tensor& table = weights_.at("model.embed_tokens.weight");
    embeds[0] = table[tokens[2]];
    embeds[1] = table[tokens[5]];
    input.embeddings = engine::RowValues{.rows = {2, 5}, .values = embeds};
    input.want_hidden = true;
    auto cache = make_cache(*model_, 4, 8);
    const ForwardOutput output = run(*model_, *cache, {input});
    expect_close(output.logits, expected, kTolerance);
    // The hidden state is the final-norm output whose projection gives the logits.
    ASSERT_TRUE(output.hidden.defined());
    ASSERT_EQ(output.hidden.sizes(), (at::IntArrayRef{1, config_.hidden_size}));
    const at::Tensor& head = model_->weights().lm_head;
    expect_close(at::matmul(output.hidden, head.t()), output.logits, kTolerance);
}

TEST_P(Qwen3ModelTest, Bfloat16StaysCloseToFloat32) {
    auto bf16_model = make_model(config_, weights_, at::kBFloat16);
    EXPECT_EQ(bf16_model->kv_spec().dtype, at::kBFloat16);
    const auto tokens = token_ids(12, config_.vocab_size, 12);
    auto run_decode = [&](Qwen3Model& model) {
        auto cache = make_cache(model, 8, 4);
        run(model, *cache, {sequence_input("a", slice(tokens, 0, 10), 0, block_range(0, 3))});
        run(model, *cache, {sequence_input("a", {tokens[10]}, 10, block_range(0, 3))});
        return run(model, *cache, {sequence_input("a", {tokens[11]}, 11, block_range(0, 3))})
            .logits;
    };
    const at::Tensor f32 = run_decode(*model_);
    const at::Tensor bf16 = run_decode(*bf16_model);
    EXPECT_EQ(bf16.scalar_type(), at::kFloat);
    const double relative_l2 = ((bf16 - f32).norm() / f32.norm()).item<double>();
    EXPECT_LT(relative_l2, 0.05);
    EXPECT_GT(at::cosine_similarity(bf16, f32, 1).item<double>(), 0.995);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, Qwen3ModelTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Moe" : "Dense"; });

// ---- Errors ----

TEST(Qwen3ModelErrors, MissingWeightIsNamed) {
    const Qwen3Config config = tiny_config();
    auto weights = random_weights(config, 1);
    weights.erase("model.layers.1.self_attn.k_norm.weight");
    auto model = Qwen3Model::create(config, testing::lookup_of(weights));
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.error().code, ErrorCode::not_found);
    EXPECT_NE(model.error().message.find("model.layers.1.self_attn.k_norm.weight"),
              std::string::npos)
        << model.error().message;
}

TEST(Qwen3ModelErrors, MissingExpertAndUntiedHeadAreNamed) {
    const Qwen3Config config = tiny_config(/*moe=*/true);
    for (const std::string name :
         {"model.layers.0.mlp.experts.3.up_proj.weight", "lm_head.weight", "model.norm.weight"}) {
        auto weights = random_weights(config, 1);
        ASSERT_EQ(weights.erase(name), 1u) << name;
        auto model = Qwen3Model::create(config, testing::lookup_of(weights));
        ASSERT_FALSE(model.has_value()) << name;
        EXPECT_NE(model.error().message.find(name), std::string::npos) << model.error().message;
    }
}

TEST(Qwen3ModelErrors, WrongShapeIsNamedWithBothShapes) {
    const Qwen3Config config = tiny_config();
    auto weights = random_weights(config, 1);
    weights["model.layers.0.self_attn.q_proj.weight"] = at::zeros({32, config.hidden_size});
    auto model = Qwen3Model::create(config, testing::lookup_of(weights));
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.error().code, ErrorCode::invalid_argument);
    const std::string& message = model.error().message;
    EXPECT_NE(message.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("[32, 64]"), std::string::npos) << message;
    EXPECT_NE(message.find("[64, 64]"), std::string::npos) << message;
}

TEST(Qwen3ModelErrors, PrefixedNamesLoad) {
    const Qwen3Config config = tiny_config(/*moe=*/true);
    const auto weights = random_weights(config, 1, "thinker.");
    auto model =
        Qwen3Model::create(config, testing::lookup_of(weights), {.weight_prefix = "thinker."});
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    auto unprefixed = Qwen3Model::create(config, testing::lookup_of(weights));
    ASSERT_FALSE(unprefixed.has_value());
    EXPECT_EQ(unprefixed.error().code, ErrorCode::not_found);
}

TEST(Qwen3ModelErrors, MalformedBatchesAreRefusedBeforeAnyWrite) {
    const Qwen3Config config = tiny_config();
    const auto weights = random_weights(config, 1);
    auto model = make_model(config, weights);
    auto cache = make_cache(*model, 4, 4);
    auto expect_error = [&](std::vector<SequenceInput> batch, ErrorCode code,
                            const std::string& fragment) {
        auto output = model->forward(batch, *cache);
        ASSERT_FALSE(output.has_value()) << fragment;
        EXPECT_EQ(output.error().code, code) << output.error().message;
        EXPECT_NE(output.error().message.find(fragment), std::string::npos)
            << output.error().message;
    };
    expect_error({}, ErrorCode::invalid_argument, "empty batch");
    expect_error({sequence_input("a", {}, 0, {0})}, ErrorCode::invalid_argument, "no new tokens");
    expect_error({sequence_input("a", {1, static_cast<std::int32_t>(config.vocab_size)}, 0, {0})},
                 ErrorCode::invalid_argument, "outside the vocabulary");
    expect_error({sequence_input("a", {1, 2, 3, 4, 5}, 0, {0})}, ErrorCode::invalid_argument,
                 "block table");
    expect_error({sequence_input("a", {1}, 0, {4})}, ErrorCode::invalid_argument, "block id 4");
    expect_error({sequence_input("a", {1}, config.max_position_embeddings, {0})},
                 ErrorCode::out_of_range, "max_positions");
    SequenceInput bad_embeds = sequence_input("a", {1, 2}, 0, {0});
    bad_embeds.embeddings =
        engine::RowValues{.rows = {0}, .values = at::zeros({1, config.hidden_size + 1})};
    expect_error({bad_embeds}, ErrorCode::invalid_argument, "embeddings values");
    SequenceInput bad_rows = sequence_input("a", {1, 2}, 0, {0});
    bad_rows.embeddings =
        engine::RowValues{.rows = {1, 0}, .values = at::zeros({2, config.hidden_size})};
    expect_error({bad_rows}, ErrorCode::invalid_argument, "ascending");
    SequenceInput bad_layer = sequence_input("a", {1, 2}, 0, {0});
    bad_layer.layer_injections.push_back(engine::LayerInjection{
        .after_layers = 0, .add = {.rows = {0}, .values = at::zeros({1, config.hidden_size})}});
    expect_error({bad_layer}, ErrorCode::invalid_argument, "after_layers");
    SequenceInput bad_capture = sequence_input("a", {1, 2}, 0, {0});
    bad_capture.captures.push_back(
        engine::CaptureRequest{.after_layers = 1, .row_begin = 1, .row_end = 3});
    expect_error({bad_capture}, ErrorCode::invalid_argument, "capture");
    SequenceInput bad_positions = sequence_input("a", {1, 2}, 0, {0});
    bad_positions.positions = at::zeros({3, 2}, at::kLong);  // the text RoPE has one axis
    expect_error({bad_positions}, ErrorCode::invalid_argument, "positions");

    engine::KVCacheSpec other = model->kv_spec();
    other.dtype = at::kBFloat16;
    auto other_cache = KVCache::create(other, 4, 4);
    ASSERT_TRUE(other_cache.has_value());
    auto output = model->forward(std::vector{sequence_input("a", {1}, 0, {0})}, **other_cache);
    ASSERT_FALSE(output.has_value());
    EXPECT_EQ(output.error().code, ErrorCode::failed_precondition);
    // Nothing was written by the refused steps.
    EXPECT_EQ(cache->keys(0).abs().sum().item<double>(), 0.0);
}

TEST(Qwen3ModelErrors, SlidingWindowAndOtherActivationsAreUnimplemented) {
    Qwen3Config config = tiny_config();
    const auto weights = random_weights(config, 1);
    config.use_sliding_window = true;
    config.sliding_window = 16;
    auto model = Qwen3Model::create(config, testing::lookup_of(weights));
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.error().code, ErrorCode::unimplemented);
}

TEST(Qwen3ModelErrors, Float16OnTheCpuIsUnimplemented) {
    const Qwen3Config config = tiny_config();
    const auto weights = random_weights(config, 1);
    auto model = Qwen3Model::create(config, testing::lookup_of(weights), {.dtype = at::kHalf});
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.error().code, ErrorCode::unimplemented);
}

TEST(Qwen3Model, AttentionBiasIsApplied) {
    Qwen3Config config = tiny_config();
    config.attention_bias = true;
    const auto weights = random_weights(config, 3);
    ASSERT_TRUE(weights.contains("model.layers.0.self_attn.q_proj.bias"));
    auto model = make_model(config, weights);
    auto no_bias_weights = weights;
    for (auto& [name, value] : no_bias_weights) {
        if (name.ends_with(".bias")) value = at::zeros_like(value);
    }
    auto zero_bias_model = make_model(config, no_bias_weights);
    config.attention_bias = false;
    auto plain_model = make_model(config, no_bias_weights);
    const auto tokens = token_ids(6, config.vocab_size, 4);
    expect_close(full_prefill_logits(*zero_bias_model, tokens),
                 full_prefill_logits(*plain_model, tokens), kTolerance);
    const double difference =
        (full_prefill_logits(*model, tokens) - full_prefill_logits(*plain_model, tokens))
            .abs()
            .max()
            .item<double>();
    EXPECT_GT(difference, 1e-3);
}

}  // namespace
}  // namespace omnirt::models::qwen3

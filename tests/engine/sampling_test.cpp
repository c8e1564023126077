#include "engine/sampling.h"

#include <ATen/ops/log_softmax.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace omnirt::engine {
namespace {

at::Tensor row_logits(const std::vector<float>& values, std::int64_t rows = 1) {
    return at::tensor(values, at::kFloat).unsqueeze(0).repeat({rows, 1}).contiguous();
}

SamplingParams with_temperature(double temperature, std::uint64_t seed = 1) {
    SamplingParams params;
    params.temperature = temperature;
    params.seed = seed;
    return params;
}

std::vector<double> distribution(const at::Tensor& logits, SamplingState& state) {
    SamplerRow row{.state = &state};
    auto probs = Sampler::sampling_distribution(logits, std::span<const SamplerRow>(&row, 1));
    EXPECT_TRUE(probs.has_value()) << probs.error().to_string();
    const at::Tensor host = probs->contiguous();
    const auto* data = host.data_ptr<double>();
    return std::vector<double>(data, data + host.size(1));
}

std::int32_t draw(const at::Tensor& logits, SamplingState& state) {
    SamplerRow row{.state = &state};
    auto sampled = Sampler::sample(logits, std::span<const SamplerRow>(&row, 1));
    EXPECT_TRUE(sampled.has_value()) << sampled.error().to_string();
    return (*sampled)[0].token;
}

const std::vector<float> kLogits = {2.0F, 1.0F, 0.5F, 0.0F, -0.5F, -1.0F, 1.5F, 0.25F};

TEST(SamplerTest, GreedyTakesTheArgmaxWithoutTouchingTheRandomStream) {
    SamplingState state(with_temperature(0.0), 1);
    SamplingState twin(with_temperature(0.0), 1);
    EXPECT_EQ(draw(row_logits(kLogits), state), 0);
    EXPECT_EQ(state.next_uniform(), twin.next_uniform());
    const auto probs = distribution(row_logits(kLogits), state);
    EXPECT_EQ(probs[0], 1.0);
    EXPECT_EQ(probs[1], 0.0);
}

TEST(SamplerTest, TemperatureFrequenciesMatchTheSoftmax) {
    constexpr double kTemperature = 0.7;
    constexpr int kDraws = 20000;
    SamplingState state(with_temperature(kTemperature, 12345), 0);
    const at::Tensor logits = row_logits(kLogits);
    std::vector<double> expected(kLogits.size());
    double total = 0;
    for (std::size_t i = 0; i < kLogits.size(); ++i) {
        expected[i] = std::exp(kLogits[i] / kTemperature);
        total += expected[i];
    }
    const auto probs = distribution(logits, state);
    for (std::size_t i = 0; i < kLogits.size(); ++i) {
        expected[i] /= total;
        EXPECT_NEAR(probs[i], expected[i], 1e-6);
    }
    // Many rows of one batch, each its own seeded stream: the same as many steps.
    std::vector<SamplingState> states;
    states.reserve(kDraws);
    for (int i = 0; i < kDraws; ++i)
        states.emplace_back(with_temperature(kTemperature, 1000 + i), 0);
    std::vector<SamplerRow> rows;
    for (auto& s : states) rows.push_back(SamplerRow{.state = &s});
    auto sampled = Sampler::sample(row_logits(kLogits, kDraws), rows);
    ASSERT_TRUE(sampled.has_value());
    std::vector<double> counts(kLogits.size(), 0);
    for (const SampledToken& token : *sampled) counts[static_cast<std::size_t>(token.token)] += 1;
    double chi_square = 0;
    for (std::size_t i = 0; i < kLogits.size(); ++i) {
        const double want = expected[i] * kDraws;
        chi_square += (counts[i] - want) * (counts[i] - want) / want;
    }
    // 7 degrees of freedom: P(chi2 > 24.32) = 0.001.
    EXPECT_LT(chi_square, 24.32);
}

TEST(SamplerTest, TopKTopPAndMinPRestrictTheSupport) {
    const at::Tensor logits = row_logits(kLogits);
    auto support = [&](SamplingParams params) {
        SamplingState state(params, 0);
        std::set<std::int32_t> out;
        const auto probs = distribution(logits, state);
        for (std::size_t i = 0; i < probs.size(); ++i) {
            if (probs[i] > 0) out.insert(static_cast<std::int32_t>(i));
        }
        // Draws stay inside it.
        for (int i = 0; i < 300; ++i) EXPECT_TRUE(out.contains(draw(logits, state)));
        return out;
    };
    SamplingParams top_k = with_temperature(1.0);
    top_k.top_k = 3;
    EXPECT_EQ(support(top_k), (std::set<std::int32_t>{0, 6, 1}));

    // Probabilities at T=1: 0.379 (0), 0.230 (6), 0.139 (1), 0.085 (2), 0.066 (7), ...
    SamplingParams top_p = with_temperature(1.0);
    top_p.top_p = 0.65;  // 0.379 + 0.230 = 0.609 < 0.65: a third token is needed
    EXPECT_EQ(support(top_p), (std::set<std::int32_t>{0, 6, 1}));
    top_p.top_p = 0.6;
    EXPECT_EQ(support(top_p), (std::set<std::int32_t>{0, 6}));
    top_p.top_p = 0.35;
    EXPECT_EQ(support(top_p), (std::set<std::int32_t>{0}));
    top_p.top_p = 0.01;  // the most likely token always stays
    EXPECT_EQ(support(top_p), (std::set<std::int32_t>{0}));

    SamplingParams min_p = with_temperature(1.0);
    min_p.min_p = 0.3;  // keep p >= 0.3 * 0.379 = 0.114: tokens 0, 6, 1
    EXPECT_EQ(support(min_p), (std::set<std::int32_t>{0, 6, 1}));

    // Renormalised: top_k 2 gives the softmax of the two logits.
    top_k.top_k = 2;
    SamplingState state(top_k, 0);
    const auto probs = distribution(logits, state);
    EXPECT_NEAR(probs[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-6);
    EXPECT_NEAR(probs[0] + probs[6], 1.0, 1e-9);
}

TEST(SamplerTest, PenaltiesChangeLogitsExactlyAsDefined) {
    SamplingParams params = with_temperature(1.0);
    params.repetition_penalty = 2.0;
    params.presence_penalty = 0.5;
    params.frequency_penalty = 0.25;
    SamplingState state(params, 0);
    state.add_prompt(std::vector<std::int32_t>{0, 5});  // prompt: repetition only
    state.add_output(1);
    state.add_output(1);
    state.add_output(5);
    state.add_output(200);  // outside the vocabulary: ignored
    const std::vector<std::int32_t> banned = {7};
    SamplerRow row{.state = &state, .banned = banned};
    const at::Tensor input = row_logits(kLogits);
    auto penalized = Sampler::penalized_logits(input, std::span<const SamplerRow>(&row, 1));
    ASSERT_TRUE(penalized.has_value());
    std::vector<float> expected = kLogits;
    expected[0] = 2.0F / 2.0F;                     // prompt, positive: divided
    expected[5] = -1.0F * 2.0F - 0.25F - 0.5F;     // prompt + output once, negative: multiplied
    expected[1] = 1.0F / 2.0F - 2 * 0.25F - 0.5F;  // output twice
    expected[7] = -INFINITY;
    const at::Tensor host = penalized->contiguous();
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_FLOAT_EQ(host[0][static_cast<std::int64_t>(i)].item<float>(), expected[i]) << i;
    }
    // The input is not modified.
    EXPECT_TRUE(input.equal(row_logits(kLogits)));
}

TEST(SamplerTest, SeedReproducibleWhateverTheBatch) {
    const at::Tensor base = at::randn({1, 50}, at::TensorOptions().dtype(at::kFloat));
    auto run = [&](std::size_t batch, std::size_t position) {
        std::vector<SamplingState> states;
        states.reserve(batch);
        for (std::size_t i = 0; i < batch; ++i) {
            SamplingParams params = with_temperature(0.9, i == position ? 42 : 7 + i);
            params.top_p = 0.95;
            params.top_k = i % 2 == 0 ? 0 : 20;
            if (i == position) params.top_k = 30;
            states.emplace_back(params, 0);
        }
        std::vector<std::int32_t> tokens;
        for (int step = 0; step < 40; ++step) {
            std::vector<SamplerRow> rows;
            for (auto& state : states) rows.push_back(SamplerRow{.state = &state});
            // Other rows see other logits.
            at::Tensor logits = base.repeat({static_cast<std::int64_t>(batch), 1}).clone();
            for (std::size_t i = 0; i < batch; ++i) {
                if (i != position)
                    logits[static_cast<std::int64_t>(i)].mul_(static_cast<double>(i + 2));
            }
            auto sampled = Sampler::sample(logits, rows);
            EXPECT_TRUE(sampled.has_value());
            tokens.push_back((*sampled)[position].token);
            for (std::size_t i = 0; i < batch; ++i) states[i].add_output((*sampled)[i].token);
        }
        return tokens;
    };
    const auto alone = run(1, 0);
    EXPECT_EQ(run(5, 3), alone);
    EXPECT_EQ(run(9, 0), alone);
    std::set<std::int32_t> distinct(alone.begin(), alone.end());
    EXPECT_GT(distinct.size(), 3u);  // it does sample
}

TEST(SamplerTest, LogprobsOfTheRawLogits) {
    SamplingParams params = with_temperature(0.0);
    params.logprobs = 3;
    params.repetition_penalty = 10.0;  // penalties do not change the reported logprobs
    SamplingState state(params, 0);
    state.add_prompt(std::vector<std::int32_t>{0});
    SamplingState plain(with_temperature(0.0), 0);
    std::vector<SamplerRow> rows = {SamplerRow{.state = &state}, SamplerRow{.state = &plain}};
    const at::Tensor logits = row_logits(kLogits, 2);
    auto sampled = Sampler::sample(logits, rows);
    ASSERT_TRUE(sampled.has_value());
    const at::Tensor logprobs = at::log_softmax(row_logits(kLogits), -1);
    const SampledToken& token = (*sampled)[0];
    EXPECT_EQ(token.token, 6);  // token 0 was penalised below token 6
    EXPECT_FLOAT_EQ(token.logprob, logprobs[0][6].item<float>());
    ASSERT_EQ(token.top.size(), 3u);
    EXPECT_EQ(token.top[0].token, 0);
    EXPECT_EQ(token.top[1].token, 6);
    EXPECT_EQ(token.top[2].token, 1);
    EXPECT_FLOAT_EQ(token.top[0].logprob, logprobs[0][0].item<float>());
    EXPECT_TRUE((*sampled)[1].top.empty());
}

TEST(SamplerTest, BannedTokensAreNeverSampled) {
    SamplingState state(with_temperature(5.0, 3), 0);
    const std::vector<std::int32_t> banned = {0, 6};
    SamplerRow row{.state = &state, .banned = banned};
    for (int i = 0; i < 200; ++i) {
        auto sampled = Sampler::sample(row_logits(kLogits), std::span<const SamplerRow>(&row, 1));
        ASSERT_TRUE(sampled.has_value());
        EXPECT_NE((*sampled)[0].token, 0);
        EXPECT_NE((*sampled)[0].token, 6);
    }
}

TEST(SamplerTest, ShapeErrors) {
    SamplingState state(with_temperature(1.0), 0);
    std::vector<SamplerRow> rows = {SamplerRow{.state = &state}};
    auto wrong_rows = Sampler::sample(row_logits(kLogits, 2), rows);
    ASSERT_FALSE(wrong_rows.has_value());
    EXPECT_EQ(wrong_rows.error().code, ErrorCode::invalid_argument);
    auto no_state = Sampler::sample(row_logits(kLogits), std::vector<SamplerRow>{SamplerRow{}});
    ASSERT_FALSE(no_state.has_value());
    auto empty = Sampler::sample(at::Tensor(), std::vector<SamplerRow>{});
    ASSERT_FALSE(empty.has_value());
}

}  // namespace
}  // namespace omnirt::engine

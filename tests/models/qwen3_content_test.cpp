// Qwen3Model's typed step input beyond token ids (engine/model_runner.h), on the tiny random
// checkpoint: explicit positions and 3-axis M-RoPE reach attention, layer injections change
// their rows at their layer (and, through causal attention, only the rows after them in later
// layers), and captures are the hidden states transformers numbers the same way.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <vector>

#include "engine/kv_cache.h"
#include "models/qwen3/layers.h"
#include "models/qwen3/qwen3_model.h"
#include "models/qwen3/rotary_embedding.h"
#include "models/qwen3_test_support.h"

namespace omnirt::models::qwen3 {
namespace {

using engine::CaptureRequest;
using engine::ForwardOutput;
using engine::LayerInjection;
using engine::RowValues;
using engine::SequenceInput;
using testing::block_range;
using testing::lookup_of;
using testing::make_cache;
using testing::sequence_input;
using testing::token_ids;

constexpr double kTolerance = 1e-4;

ForwardOutput run(Qwen3Model& model, SequenceInput input) {
    auto cache = make_cache(model, 8, 8);
    std::vector<SequenceInput> batch{std::move(input)};
    auto output = model.forward(batch, *cache);
    OMNI_CHECK(output.has_value(), output.has_value() ? "" : output.error().to_string());
    return std::move(*output);
}

std::unique_ptr<Qwen3Model> mrope_model(const Qwen3Config& config,
                                        const testing::WeightMap& weights) {
    const int slots = static_cast<int>(config.head_dim / 2);
    const std::array<int, 3> sections{slots - 2 * (slots / 3), slots / 3, slots / 3};
    auto model = Qwen3Model::create(config, lookup_of(weights),
                                    {.rotary = std::make_unique<InterleavedMRotaryEmbedding>(
                                         static_cast<int>(config.head_dim), config.rope_theta,
                                         config.max_position_embeddings, sections)});
    OMNI_CHECK(model.has_value(), "M-RoPE model");
    return std::move(*model);
}

void expect_close(const at::Tensor& actual, const at::Tensor& expected) {
    EXPECT_TRUE(at::allclose(actual, expected, kTolerance, kTolerance))
        << "max difference " << (actual - expected).abs().max().item<double>();
}

class Qwen3ContentTest : public ::testing::Test {
  protected:
    Qwen3ContentTest()
        : config_(testing::tiny_config()),
          weights_(testing::random_weights(config_, 21)),
          model_(testing::make_model(config_, weights_)),
          tokens_(token_ids(10, config_.vocab_size, 3)) {}

    SequenceInput input() const { return sequence_input("s", tokens_, 0, block_range(0, 2)); }

    Qwen3Config config_;
    testing::WeightMap weights_;
    std::unique_ptr<Qwen3Model> model_;
    std::vector<std::int32_t> tokens_;
};

TEST_F(Qwen3ContentTest, ExplicitPositionsEqualTheDefaultAndOthersChangeTheLogits) {
    const at::Tensor plain = run(*model_, input()).logits;
    SequenceInput same = input();
    same.positions = at::arange(10, at::kLong);
    expect_close(run(*model_, same).logits, plain);
    SequenceInput shifted = input();
    shifted.positions = at::arange(10, at::kLong) + 5;  // RoPE is relative: same attention
    expect_close(run(*model_, shifted).logits, plain);
    SequenceInput squeezed = input();
    squeezed.positions = at::arange(10, at::kLong).clamp_max(4);  // an "image" at 4..9
    EXPECT_FALSE(at::allclose(run(*model_, squeezed).logits, plain, kTolerance, kTolerance));
}

TEST_F(Qwen3ContentTest, MRopeWithEqualAxesIsTheTextRopeAndItsAxesReachAttention) {
    auto mrope = mrope_model(config_, weights_);
    EXPECT_EQ(mrope->capabilities().position_axes, 3);
    const at::Tensor plain = run(*model_, input()).logits;
    expect_close(run(*mrope, input()).logits, plain);  // no positions: the cache index
    SequenceInput equal = input();
    equal.positions = at::arange(10, at::kLong).unsqueeze(0).repeat({3, 1});
    expect_close(run(*mrope, equal).logits, plain);
    // A 2 x 3 grid at positions 4..9: temporal constant, height and width differ.
    SequenceInput grid = input();
    at::Tensor positions = at::arange(10, at::kLong).unsqueeze(0).repeat({3, 1});
    for (std::int64_t i = 4; i < 10; ++i) {
        positions[0][i] = 4;
        positions[1][i] = 4 + (i - 4) / 3;
        positions[2][i] = 4 + (i - 4) % 3;
    }
    grid.positions = positions;
    const at::Tensor with_grid = run(*mrope, grid).logits;
    EXPECT_FALSE(at::allclose(with_grid, plain, kTolerance, kTolerance));
    // Swapping height and width is another layout: the axes are not interchangeable.
    SequenceInput swapped = input();
    swapped.positions = positions.index_select(0, at::tensor({0, 2, 1}, at::kLong));
    EXPECT_FALSE(at::allclose(run(*mrope, swapped).logits, with_grid, kTolerance, kTolerance));
}

TEST_F(Qwen3ContentTest, InjectionsChangeTheirRowsAtTheirLayerAndLaterRowsAfterIt) {
    const std::int32_t layers = static_cast<std::int32_t>(config_.num_hidden_layers);
    auto with_captures = [&](SequenceInput sequence) {
        for (std::int32_t n = 0; n <= layers; ++n) {
            sequence.captures.push_back(
                CaptureRequest{.after_layers = n, .row_begin = 0, .row_end = 10});
        }
        sequence.want_hidden = true;
        return run(*model_, std::move(sequence));
    };
    const ForwardOutput plain = with_captures(input());
    ASSERT_EQ(plain.captures.size(), 1u);
    ASSERT_EQ(plain.captures[0].size(), static_cast<std::size_t>(layers) + 1);
    // Captures after 0 layers are the embeddings; after the last, the final norm gives hidden.
    expect_close(plain.captures[0][0], weights_.at("model.embed_tokens.weight")
                                           .index_select(0, at::tensor(std::vector<std::int64_t>(
                                                                tokens_.begin(), tokens_.end()))));
    expect_close(rms_norm(plain.captures[0][static_cast<std::size_t>(layers)].narrow(0, 9, 1),
                          weights_.at("model.norm.weight"), config_.rms_norm_eps),
                 plain.hidden);

    SequenceInput injected = input();
    const at::Tensor add = at::randn({2, config_.hidden_size});
    injected.layer_injections.push_back(
        LayerInjection{.after_layers = 1, .add = RowValues{.rows = {3, 6}, .values = add}});
    const ForwardOutput changed = with_captures(injected);
    // After 0 layers: nothing; after 1: exactly rows 3 and 6, by `add`.
    expect_close(changed.captures[0][0], plain.captures[0][0]);
    at::Tensor expected = plain.captures[0][1].clone();
    expected[3] += add[0];
    expected[6] += add[1];
    expect_close(changed.captures[0][1], expected);
    // Later layers: rows before 3 see nothing (causal), rows from 3 on change.
    for (std::int32_t n = 2; n <= layers; ++n) {
        const at::Tensor before = changed.captures[0][static_cast<std::size_t>(n)];
        const at::Tensor reference = plain.captures[0][static_cast<std::size_t>(n)];
        expect_close(before.narrow(0, 0, 3), reference.narrow(0, 0, 3));
        EXPECT_FALSE(at::allclose(before.narrow(0, 3, 7), reference.narrow(0, 3, 7), kTolerance,
                                  kTolerance));
    }
    EXPECT_FALSE(at::allclose(changed.logits, plain.logits, kTolerance, kTolerance));
}

TEST_F(Qwen3ContentTest, ChunkedCapturesEqualTheWholePromptsRows) {
    SequenceInput whole = input();
    whole.captures.push_back(CaptureRequest{.after_layers = 1, .row_begin = 2, .row_end = 10});
    const at::Tensor reference = run(*model_, whole).captures[0][0];
    auto cache = make_cache(*model_, 8, 8);
    std::vector<at::Tensor> parts;
    for (std::int64_t begin : {0, 4, 7}) {
        const std::int64_t end = begin == 7 ? 10 : (begin == 0 ? 4 : 7);
        SequenceInput chunk = sequence_input(
            "s", std::vector<std::int32_t>(tokens_.begin() + begin, tokens_.begin() + end), begin,
            block_range(0, 2));
        const std::int64_t first = std::max<std::int64_t>(begin, 2);
        chunk.captures.push_back(
            CaptureRequest{.after_layers = 1, .row_begin = first - begin, .row_end = end - begin});
        std::vector<SequenceInput> batch{chunk};
        auto output = model_->forward(batch, *cache);
        ASSERT_TRUE(output.has_value()) << output.error().to_string();
        parts.push_back(output->captures[0][0]);
    }
    expect_close(at::cat(parts, 0), reference);
}

}  // namespace
}  // namespace omnirt::models::qwen3

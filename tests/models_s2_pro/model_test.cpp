// S2-Pro's slow and fast AR against a direct computation from the fact sheet: the RoPE variant
// (interleaved pairs, bf16 table) equals the de-interleaved weights through the shared stack's
// rotate-half RoPE; the slow AR's logits and hidden state (with reference-code embeddings at VQ
// positions) and the fast AR's codebook logits equal the reference forward on the fish weights
// as stored; malformed weights fail naming the tensor.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "engine/kv_cache.h"
#include "models/qwen3/layers.h"
#include "models/s2_pro/fish_layers.h"
#include "models/s2_pro/s2_pro_model.h"
#include "s2_pro_test_support.h"

namespace omnirt::models::s2_pro {
namespace {

using namespace testing;

TEST(S2ProRopeTest, DeinterleavedRotateHalfEqualsTheInterleavedVariant) {
    at::manual_seed(7);
    for (const std::int64_t d : {16, 128}) {
        const at::Tensor x = at::randn({9, 3, d}, at::kFloat);
        const at::Tensor positions = at::tensor({0, 1, 2, 5, 100, 4095, 17, 32767, 9}, at::kLong);
        const at::Tensor direct = reference::rope_interleaved(x, positions, 1e6);

        // The runtime: permute each head's dims (evens, then odds), rotate-half with the fish
        // tables, permute back.
        // (deinterleave_heads permutes rows: the dims of one head are the rows of x^T.)
        at::Tensor permuted =
            deinterleave_heads(x.reshape({27, d}).t(), d).t().reshape({9, 3, d}).contiguous();
        qwen3::apply_rotary(permuted, fish_rotary_tables(positions, d, 1e6, at::kCPU));
        const at::Tensor back = permuted.view({9, 3, 2, d / 2}).transpose(2, 3).reshape({9, 3, d});
        EXPECT_TRUE(at::allclose(back, direct, 1e-6, 1e-6)) << "head_dim " << d;
    }
}

TEST(S2ProRopeTest, TableIsRoundedToBfloat16) {
    const qwen3::RotaryTables tables =
        fish_rotary_tables(at::tensor({3, 1000}, at::kLong), 128, 1e6, at::kCPU);
    EXPECT_TRUE(at::equal(tables.cos, tables.cos.to(at::kBFloat16).to(at::kFloat)));
    EXPECT_TRUE(at::equal(tables.sin, tables.sin.to(at::kBFloat16).to(at::kFloat)));
    // Rotate-half layout: the d / 2 values twice; position 1000's first angle is 1000 rad.
    EXPECT_TRUE(at::equal(tables.cos.narrow(1, 0, 64), tables.cos.narrow(1, 64, 64)));
    EXPECT_FLOAT_EQ(tables.cos[1][0].item<float>(),
                    at::tensor({std::cos(1000.0f)}).to(at::kBFloat16).item<float>());
}

TEST(S2ProModelTest, SlowArMatchesTheReferenceWithCodeEmbeddings) {
    const S2ProConfig config = tiny_config();
    const WeightMap weights = random_weights(config, 11);
    auto model = load_s2_pro_model(config, lookup_of(weights), at::kFloat, at::kCPU);
    ASSERT_TRUE(model.has_value()) << model.error().to_string();

    // Prompt: text ids, two reference frames at positions 3 and 4, more text.
    const std::vector<std::int32_t> prompt = {151644, 872,    198,    151678 + 12, 151678 + 4000,
                                              77,     151645, 151644, 151673};
    const std::vector<std::vector<std::int64_t>> codes = {{12, 5, 900, 1, 2, 3, 1023, 0, 77, 8},
                                                          {4000, 1000, 2, 3, 4, 5, 6, 7, 8, 9}};
    std::map<std::int64_t, std::vector<std::int64_t>> vq{{3, codes[0]}, {4, codes[1]}};
    const at::Tensor frame_ids = at::tensor({prompt[3], prompt[4]}, at::kLong);
    const at::Tensor frame_codes =
        at::tensor(std::vector<std::int64_t>(codes[0].begin(), codes[0].end()), at::kLong);
    const at::Tensor both = at::stack(
        {frame_codes,
         at::tensor(std::vector<std::int64_t>(codes[1].begin(), codes[1].end()), at::kLong)});
    const at::Tensor injected = model->embedder->embed(frame_ids, both);
    EXPECT_TRUE(at::allclose(
        injected[1], reference::frame_embedding(weights, config, prompt[4], codes[1]), 1e-6, 1e-6));

    auto cache = engine::KVCache::create(model->slow->kv_spec(), 4, 16);
    ASSERT_TRUE(cache.has_value());
    engine::SequenceInput input{.request_id = "r",
                                .tokens = prompt,
                                .start_position = 0,
                                .block_table = {0},
                                .embeddings = engine::RowValues{.rows = {3, 4}, .values = injected},
                                .want_hidden = true};
    auto output = model->slow->forward({&input, 1}, **cache);
    ASSERT_TRUE(output.has_value()) << output.error().to_string();

    std::vector<at::Tensor> inputs;
    const at::Tensor& table = weights.at("text_model.model.embeddings.weight");
    for (std::size_t p = 0; p < prompt.size(); ++p) {
        auto it = vq.find(static_cast<std::int64_t>(p));
        inputs.push_back(it == vq.end()
                             ? table[prompt[p]]
                             : reference::frame_embedding(weights, config, prompt[p], it->second));
    }
    const at::Tensor hidden =
        reference::stack_forward(weights, "text_model.model.", config.text, at::stack(inputs))[-1];
    const at::Tensor logits = at::matmul(hidden, table.t());
    EXPECT_TRUE(at::allclose(output->hidden[0], hidden, 1e-4, 1e-4))
        << (output->hidden[0] - hidden).abs().max().item<float>();
    // The head computes only <|im_end|> and the semantic ids (section 4.5); the rest are -inf.
    at::Tensor allowed = at::zeros({config.text.vocab_size}, at::kBool);
    allowed
        .narrow(0, config.ids.semantic_begin,
                config.ids.semantic_end - config.ids.semantic_begin + 1)
        .fill_(true);
    allowed[config.ids.im_end] = true;
    const at::Tensor computed = output->logits[0].masked_select(allowed);
    EXPECT_TRUE(at::allclose(computed, logits.masked_select(allowed), 1e-4, 1e-3))
        << (computed - logits.masked_select(allowed)).abs().max().item<float>();
    const at::Tensor rest = output->logits[0].masked_select(allowed.logical_not());
    EXPECT_TRUE(at::all(at::isinf(rest) & (rest < 0)).item<bool>());

    // One decode step with a fed-back frame at position 9 matches the longer reference.
    const std::vector<std::int64_t> fed = {33, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const at::Tensor feedback = model->embedder->embed(at::tensor({151678 + 33}, at::kLong),
                                                       at::tensor(fed, at::kLong).view({1, -1}));
    engine::SequenceInput step{.request_id = "r",
                               .tokens = {151678 + 33},
                               .start_position = 9,
                               .block_table = {0},
                               .embeddings = engine::RowValues{.rows = {0}, .values = feedback},
                               .want_hidden = true};
    auto next = model->slow->forward({&step, 1}, **cache);
    ASSERT_TRUE(next.has_value()) << next.error().to_string();
    inputs.push_back(reference::frame_embedding(weights, config, 151678 + 33, fed));
    const at::Tensor longer =
        reference::stack_forward(weights, "text_model.model.", config.text, at::stack(inputs))[-1];
    EXPECT_TRUE(at::allclose(next->hidden[0], longer, 1e-4, 1e-4))
        << (next->hidden[0] - longer).abs().max().item<float>();
}

TEST(S2ProModelTest, FastArMatchesTheReferenceFrame) {
    const S2ProConfig config = tiny_config();
    const WeightMap weights = random_weights(config, 12);
    auto model = load_s2_pro_model(config, lookup_of(weights), at::kFloat, at::kCPU);
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    FastAr& fast = *model->fast;
    EXPECT_EQ(fast.num_codes(), 10);
    EXPECT_EQ(fast.vocab_size(3), 4096);

    at::manual_seed(3);
    const at::Tensor hidden = at::randn({2, config.text.dim}, at::kFloat);
    const std::vector<std::int32_t> tokens = {151678 + 4095, 151645};  // the second: im_end -> 0
    std::vector<std::vector<at::Tensor>> expected(2);
    std::vector<std::vector<std::int64_t>> frames;
    for (int r = 0; r < 2; ++r) {
        frames.push_back(
            reference::fast_frame(weights, config, hidden[r], tokens[r], &expected[r]));
    }
    EXPECT_EQ(frames[0][0], 4095);
    EXPECT_EQ(frames[1][0], 0);

    auto first = fast.begin_frame(hidden, tokens);
    ASSERT_TRUE(first.has_value()) << first.error().to_string();
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(first->select(0, r).argmax().item<std::int64_t>(), frames[r][0]);
        EXPECT_EQ(at::isfinite(first->select(0, r)).sum().item<std::int64_t>(), 1);
    }
    for (int k = 1; k < 10; ++k) {
        const std::vector<std::int32_t> previous = {static_cast<std::int32_t>(frames[0][k - 1]),
                                                    static_cast<std::int32_t>(frames[1][k - 1])};
        auto logits = fast.next(k, previous);
        ASSERT_TRUE(logits.has_value()) << logits.error().to_string();
        for (int r = 0; r < 2; ++r) {
            const at::Tensor& want = expected[r][static_cast<std::size_t>(k - 1)];
            EXPECT_TRUE(at::allclose(logits->select(0, r), want, 1e-4, 1e-4))
                << "depth " << k << " row " << r << ": "
                << (logits->select(0, r) - want).abs().max().item<float>();
        }
    }
    // Past the last codebook, or out of order, is refused; end_frame frees the scratch.
    EXPECT_FALSE(fast.next(10, {{0, 0}}).has_value());
    fast.end_frame();
    EXPECT_TRUE(fast.frame_free());
    EXPECT_FALSE(fast.next(1, {{0, 0}}).has_value());
}

TEST(S2ProModelTest, MissingOrMisshapenWeightsFailNamingTheTensor) {
    const S2ProConfig config = tiny_config();
    WeightMap weights = random_weights(config, 1);
    weights.erase("audio_decoder.layers.1.feed_forward.w3.weight");
    auto missing = load_s2_pro_model(config, lookup_of(weights), at::kFloat, at::kCPU);
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_NE(missing.error().message.find("audio_decoder.layers.1.feed_forward.w3.weight"),
              std::string::npos)
        << missing.error().message;

    WeightMap bad = random_weights(config, 1);
    bad["text_model.model.layers.1.attention.wqkv.weight"] = at::zeros({10, 64});
    auto shape = load_s2_pro_model(config, lookup_of(bad), at::kFloat, at::kCPU);
    ASSERT_FALSE(shape.has_value());
    EXPECT_EQ(shape.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(shape.error().message.find("text_model.model.layers.1.attention.wqkv.weight"),
              std::string::npos)
        << shape.error().message;

    WeightMap codebooks = random_weights(config, 1);
    codebooks["audio_decoder.codebook_embeddings.weight"] = at::zeros({4096, 64});
    auto table = load_s2_pro_model(config, lookup_of(codebooks), at::kFloat, at::kCPU);
    ASSERT_FALSE(table.has_value());
    EXPECT_NE(table.error().message.find("codebook_embeddings"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::models::s2_pro

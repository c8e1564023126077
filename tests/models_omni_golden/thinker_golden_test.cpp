// The Qwen3-Omni thinker (Qwen3Model over `thinker.` with M-RoPE) on a generated tiny checkpoint:
// text-only prompts equal the same weights run as a plain Qwen3-MoE, and prompts with image and
// audio features, DeepStack additions and 3-D positions match Hugging Face transformers
// (tests/goldens/hf/qwen3_omni_tiny.safetensors, from scripts/goldens/hf_goldens.py over the
// checkpoint `omnirt make-checkpoint --arch qwen3_omni --preset tiny --seed 7 --init-std 0.1`).
// The media features are transformers' own here, so a mismatch is the thinker's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "engine/kv_cache.h"
#include "models/qwen3_omni/rope_index.h"
#include "models/qwen3_omni/thinker_model.h"
#include "models_omni_golden/golden_support.h"

namespace omnirt::models::qwen3_omni {
namespace {

using engine::SequenceInput;

TEST(OmniThinkerTest, TextOnlyPromptsEqualThePlainQwen3Moe) {
    auto tiny = make_tiny();
    auto omni = load_thinker(tiny->config, lookup_of(*tiny->checkpoint));
    ASSERT_TRUE(omni.has_value()) << omni.error().to_string();
    EXPECT_EQ((*omni)->capabilities().position_axes, 3);
    auto plain = qwen3::Qwen3Model::create(tiny->config.thinker_text, lookup_of(*tiny->checkpoint),
                                           {.weight_prefix = "thinker."});
    ASSERT_TRUE(plain.has_value()) << plain.error().to_string();
    auto omni_cache = make_cache(**omni);
    auto plain_cache = make_cache(**plain);
    std::vector<std::int32_t> tokens;
    for (std::int32_t i = 0; i < 23; ++i) tokens.push_back(100 + 37 * i);
    SequenceInput input{
        .request_id = "a", .tokens = tokens, .start_position = 0, .block_table = blocks()};
    auto a = (*omni)->forward(std::vector{input}, *omni_cache);
    auto b = (*plain)->forward(std::vector{input}, *plain_cache);
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_TRUE(at::allclose(a->logits, b->logits, 1e-5, 1e-5));
    // Decode steps too (positions start_position + i on all three axes).
    input.tokens = {7};
    input.start_position = 23;
    a = (*omni)->forward(std::vector{input}, *omni_cache);
    b = (*plain)->forward(std::vector{input}, *plain_cache);
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_TRUE(at::allclose(a->logits, b->logits, 1e-5, 1e-5));
}

TEST(OmniThinkerTest, BadMropeSectionsAreRefused) {
    qwen3::Qwen3Config text;
    text.head_dim = 16;
    text.rope_scaling = {{"mrope_section", {4, 2, 3}}};
    EXPECT_EQ(mrope_sections(text).error().code, ErrorCode::invalid_argument);
    text.rope_scaling = {{"mrope_section", "x"}};
    EXPECT_EQ(mrope_sections(text).error().code, ErrorCode::invalid_argument);
    text.rope_scaling = nullptr;
    EXPECT_EQ(mrope_sections(text).error().code, ErrorCode::invalid_argument);
    text.rope_scaling = {{"mrope_section", {4, 2, 2}}};
    EXPECT_TRUE(mrope_sections(text).has_value());
}

// ---- against transformers ---------------------------------------------------------------------

std::vector<std::int64_t> rows_of(const at::Tensor& ids, std::int64_t token) {
    std::vector<std::int64_t> rows;
    for (std::int64_t i = 0; i < ids.size(0); ++i) {
        if (ids[i].item<std::int64_t>() == token) rows.push_back(i);
    }
    return rows;
}

TEST(OmniThinkerTest, ImageAndAudioPromptMatchesTransformers) {
    auto golden = Golden::open();
    if (!golden) GTEST_SKIP() << "tests/goldens/hf/qwen3_omni_tiny.safetensors not generated yet";
    if (!golden->has("image_audio.positions")) GTEST_SKIP() << "no positions in the goldens";
    auto tiny = make_tiny();
    auto model = load_thinker(tiny->config, lookup_of(*tiny->checkpoint));
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    auto cache = make_cache(**model);

    const at::Tensor ids = golden->get("image_audio.input_ids");
    const auto image_rows = rows_of(ids, tiny->config.ids.image);
    const auto audio_rows = rows_of(ids, tiny->config.ids.audio);
    const at::Tensor image =
        golden->first({"visual_image.pooler_output", "visual_image.last_hidden_state"});
    // The first audio of the batch is the prompt's; the tower packs both.
    const at::Tensor audio =
        golden->first({"audio_tower.last_hidden_state"}).slice(0, 0, audio_rows.size());
    ASSERT_EQ(image.size(0), static_cast<std::int64_t>(image_rows.size()));

    SequenceInput input{.request_id = "a", .start_position = 0, .block_table = blocks()};
    for (std::int64_t i = 0; i < ids.size(0); ++i) {
        input.tokens.push_back(static_cast<std::int32_t>(ids[i].item<std::int64_t>()));
    }
    std::vector<std::int64_t> rows = image_rows;
    rows.insert(rows.end(), audio_rows.begin(), audio_rows.end());
    at::Tensor values = at::cat({image, audio});
    // Rows ascending, values alike.
    std::vector<std::int64_t> order(rows.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return rows[a] < rows[b]; });
    std::vector<std::int64_t> sorted_rows;
    for (auto k : order) sorted_rows.push_back(rows[k]);
    input.embeddings = engine::RowValues{
        .rows = sorted_rows,
        .values = values.index_select(
            0, at::tensor(std::vector<std::int64_t>(order.begin(), order.end())))};
    for (int k = 0; k < 3; ++k) {
        const std::string name = "visual_image.deepstack_features." + std::to_string(k);
        ASSERT_TRUE(golden->has(name)) << name;
        input.layer_injections.push_back(
            {.after_layers = k + 1, .add = {.rows = image_rows, .values = golden->get(name)}});
    }
    input.positions = golden->get("image_audio.positions").to(at::kLong);
    input.captures.push_back({.after_layers = 0, .row_begin = 0, .row_end = ids.size(0)});
    auto output = (*model)->forward(std::vector{input}, *cache);
    ASSERT_TRUE(output.has_value()) << output.error().to_string();

    const at::Tensor hidden = golden->get("image_audio.hidden_states");
    EXPECT_LT((output->captures[0][0].to(at::kFloat) - hidden[0]).abs().max().item<double>(), 1e-4);
    const at::Tensor expected = golden->get("image_audio.last_logits");
    const double diff = (at::log_softmax(output->logits[0], -1) - at::log_softmax(expected, -1))
                            .abs()
                            .max()
                            .item<double>();
    EXPECT_LT(diff, 1e-2);
    EXPECT_EQ(output->logits[0].argmax().item<std::int64_t>(),
              expected.argmax().item<std::int64_t>());
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

namespace omnirt::models::qwen3_omni {
namespace {

// transformers' generate (greedy thinker) on an image prompt: our 3-D positions
// (compute_rope_index) for the prompt, then decode steps at cache index + rope_delta, give the
// same six tokens.
TEST(OmniThinkerTest, GreedyContinuationMatchesTransformersGenerate) {
    auto golden = Golden::open();
    if (!golden || !golden->has("generate.sequences")) GTEST_SKIP() << "no generate golden";
    auto tiny = make_tiny();
    auto model = load_thinker(tiny->config, lookup_of(*tiny->checkpoint));
    ASSERT_TRUE(model.has_value()) << model.error().to_string();
    auto cache = make_cache(**model);

    const at::Tensor ids = golden->get("generate.input_ids");
    const at::Tensor sequences = golden->get("generate.sequences");
    std::vector<std::int64_t> prompt(ids.data_ptr<std::int64_t>(),
                                     ids.data_ptr<std::int64_t>() + ids.size(0));
    const at::Tensor grid = golden->get("inputs.image_grid")[0];
    MediaItems media;
    media.images.push_back(
        {grid[0].item<std::int64_t>(), grid[1].item<std::int64_t>(), grid[2].item<std::int64_t>()});
    auto rope = compute_rope_index(prompt, media);
    ASSERT_TRUE(rope.has_value()) << rope.error().to_string();
    const auto n = static_cast<std::int64_t>(prompt.size());
    at::Tensor positions = at::empty({3, n}, at::kLong);
    for (std::int64_t axis = 0; axis < 3; ++axis) {
        for (std::int64_t row = 0; row < n; ++row) {
            positions[axis][row] = static_cast<std::int64_t>(rope->positions[axis][row]);
        }
    }
    const auto delta = static_cast<std::int64_t>(rope->rope_delta);

    SequenceInput input{.request_id = "a", .start_position = 0, .block_table = blocks()};
    for (std::int64_t id : prompt) input.tokens.push_back(static_cast<std::int32_t>(id));
    const auto image_rows = rows_of(ids, tiny->config.ids.image);
    input.embeddings =
        engine::RowValues{.rows = image_rows, .values = golden->get("visual_image.pooler_output")};
    for (int k = 0; k < 3; ++k) {
        input.layer_injections.push_back(
            {.after_layers = k + 1,
             .add = {
                 .rows = image_rows,
                 .values = golden->get("visual_image.deepstack_features." + std::to_string(k))}});
    }
    input.positions = positions;
    auto output = (*model)->forward(std::vector{input}, *cache);
    ASSERT_TRUE(output.has_value()) << output.error().to_string();
    std::int64_t position = n;
    for (std::int64_t k = n; k < sequences.size(0); ++k) {
        const std::int64_t expected = sequences[k].item<std::int64_t>();
        ASSERT_EQ(output->logits[0].argmax().item<std::int64_t>(), expected) << "token " << k - n;
        SequenceInput step{.request_id = "a",
                           .tokens = {static_cast<std::int32_t>(expected)},
                           .start_position = position,
                           .block_table = blocks()};
        step.positions = at::full({3, 1}, position + delta, at::kLong);
        output = (*model)->forward(std::vector{step}, *cache);
        ASSERT_TRUE(output.has_value()) << output.error().to_string();
        ++position;
    }
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

namespace omnirt::models::qwen3_omni {
namespace {

// compute_rope_index against transformers' get_rope_index on the goldens' prompts: text only,
// an image with an audio, and a two-group video (second_per_grid 1.0).
TEST(OmniPositionsGoldenTest, RopeIndexMatchesTransformers) {
    auto golden = Golden::open();
    if (!golden || !golden->has("video.positions")) GTEST_SKIP() << "no positions golden";
    const at::Tensor image_grid = golden->get("inputs.image_grid")[0];
    const at::Tensor video_grid = golden->get("inputs.video_grid")[0];
    const std::int64_t audio_frames = golden->get("inputs.audio_lengths")[0].item<std::int64_t>();
    auto grid_of = [](const at::Tensor& row) {
        return GridThw{row[0].item<std::int64_t>(), row[1].item<std::int64_t>(),
                       row[2].item<std::int64_t>()};
    };
    struct Case {
        std::string name;
        MediaItems media;
    };
    std::vector<Case> cases(3);
    cases[0].name = "text";
    cases[1].name = "image_audio";
    cases[1].media.images.push_back(grid_of(image_grid));
    cases[1].media.audio_mel_frames.push_back(audio_frames);
    cases[2].name = "video";
    cases[2].media.videos.push_back(
        {.grid = grid_of(video_grid),
         .second_per_grid = golden->get("inputs.video_second_per_grid")[0].item<double>()});
    for (const Case& c : cases) {
        const at::Tensor ids = golden->get(c.name + ".input_ids");
        std::vector<std::int64_t> prompt(ids.data_ptr<std::int64_t>(),
                                         ids.data_ptr<std::int64_t>() + ids.size(0));
        auto rope = compute_rope_index(prompt, c.media);
        ASSERT_TRUE(rope.has_value()) << c.name << ": " << rope.error().to_string();
        const at::Tensor expected = golden->get(c.name + ".positions");
        for (std::int64_t axis = 0; axis < 3; ++axis) {
            for (std::int64_t row = 0; row < ids.size(0); ++row) {
                ASSERT_EQ(rope->positions[axis][row], expected[axis][row].item<float>())
                    << c.name << " axis " << axis << " row " << row;
            }
        }
        EXPECT_EQ(rope->rope_delta, golden->get(c.name + ".rope_delta")[0].item<float>()) << c.name;
    }
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

// qwen3_omni.image_encoder over the tiny checkpoint: outputs equal the VisionEncoder's (a batch
// of requests is one forward and equals each item alone), the cache answers repeated keys
// without a forward and stays within its bytes, malformed requests fail alone naming the item,
// an abort during the forward drops only that request.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "models/qwen3_omni/encoder_stages.h"
#include "models/qwen3_omni/vision_encoder.h"
#include "pipeline/stage_factory.h"
#include "stage_harness.h"

namespace omnirt::models::qwen3_omni {
namespace {

using namespace testing;

struct Started {
    std::unique_ptr<pipeline::Scheduler> stage;
    std::shared_ptr<EncoderStageCounters> counters = std::make_shared<EncoderStageCounters>();
};

// A stage with counters; requests pushed before start() form one batch (up to max_batch_size).
Started make_stage(Map extra = {}, std::function<void()> before_forward = {}) {
    Started started;
    auto stage = make_image_encoder_stage(
        stage_context("image_encoder", std::move(extra)),
        EncoderStageHooks{.counters = started.counters, .before_forward = before_forward});
    OMNI_CHECK(stage.has_value(), stage.has_value() ? "" : stage.error().to_string().c_str());
    started.stage = std::move(*stage);
    return started;
}

std::unique_ptr<VisionEncoder> reference_encoder() {
    auto checkpoint = open_tiny();
    auto config = vision_encoder_config_of(checkpoint->config());
    OMNI_CHECK(config.has_value(), "vision config");
    auto encoder = VisionEncoder::load(
        *config, [&](const std::string& name) { return checkpoint->tensor(name); });
    OMNI_CHECK(encoder.has_value(), "vision encoder");
    return std::move(*encoder);
}

// The encoder's outputs for `items` ({key, grid}) in one forward.
std::vector<VisionItemOutput> direct(const VisionEncoder& encoder,
                                     const std::vector<std::array<std::int64_t, 4>>& items) {
    std::vector<at::Tensor> pixels;
    std::vector<GridThw> grids;
    for (const auto& [key, t, h, w] : items) {
        pixels.push_back(pattern({t * h * w, 1536}, key));
        grids.push_back({.t = t, .h = h, .w = w});
    }
    auto out = encoder.forward(at::cat(pixels), grids);
    OMNI_CHECK(out.has_value(), "direct forward");
    return std::move(*out);
}

void expect_item(const Map& item, std::int64_t key, const VisionItemOutput& expected,
                 double tolerance) {
    EXPECT_EQ(item.at("key"), Value(key));
    const at::Tensor embeddings = torch_of(item.at("embeddings"));
    EXPECT_EQ(embeddings.scalar_type(), at::kFloat);
    ASSERT_EQ(embeddings.sizes(), expected.embeddings.sizes());
    EXPECT_LE((embeddings - expected.embeddings).abs().max().item<double>(), tolerance);
    const List& deepstack = item.at("deepstack").as_list();
    ASSERT_EQ(deepstack.size(), expected.deepstack.size());
    ASSERT_EQ(deepstack.size(), 3u);
    for (std::size_t k = 0; k < deepstack.size(); ++k) {
        const at::Tensor feature = torch_of(deepstack[k]);
        ASSERT_EQ(feature.sizes(), expected.deepstack[k].sizes());
        EXPECT_LE((feature - expected.deepstack[k]).abs().max().item<double>(), tolerance);
    }
}

TEST(ImageEncoderStage, RegistersAndRunsThroughTheFactory) {
    Registry registry;
    ASSERT_TRUE(register_encoder_stages(registry).has_value());
    ASSERT_TRUE(register_encoder_stages(registry).has_value());  // idempotent
    auto entry = registry.find(FunctionKind::factory, "qwen3_omni.image_encoder");
    ASSERT_TRUE(entry.has_value());
    EXPECT_EQ(entry->injectable_args, std::vector<std::string>{"model_path"});
    auto factory = pipeline::find_stage_factory("qwen3_omni.image_encoder", registry);
    ASSERT_TRUE(factory.has_value());
    auto stage = (*factory)(stage_context("image_encoder"));
    ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
    submit(**stage, "a", items_data({image_item(11, 1, 4, 4)}));
    ASSERT_TRUE((*stage)->start().has_value());
    auto results = collect(**stage, 1);
    ASSERT_TRUE(results.at("a").has_value()) << results.at("a").error().to_string();
    const auto expected = direct(*reference_encoder(), {{11, 1, 4, 4}});
    expect_item(item_of(*results.at("a"), 0), 11, expected[0], 0.0);
}

TEST(ImageEncoderStage, ArgumentErrorsNameTheArgument) {
    auto missing = make_image_encoder_stage(pipeline::StageContext{.stage_name = "vision"});
    ASSERT_FALSE(missing.has_value());
    EXPECT_NE(missing.error().message.find("'model_path' is required"), std::string::npos);
    auto dtype = make_image_encoder_stage(stage_context("vision", {{"dtype", Value("float16")}}));
    ASSERT_FALSE(dtype.has_value());
    EXPECT_NE(dtype.error().message.find("'dtype' must be float32 or bfloat16"), std::string::npos);
    auto batch = make_image_encoder_stage(stage_context("vision", {{"max_batch_size", Value(0)}}));
    ASSERT_FALSE(batch.has_value());
    EXPECT_NE(batch.error().message.find("'max_batch_size'"), std::string::npos);
    auto cache = make_image_encoder_stage(stage_context("vision", {{"cache_bytes", Value(-1)}}));
    ASSERT_FALSE(cache.has_value());
    auto nowhere = make_image_encoder_stage(pipeline::StageContext{
        .stage_name = "vision", .args = {{"model_path", Value("/nonexistent/omnirt")}}});
    ASSERT_FALSE(nowhere.has_value());
    EXPECT_NE(nowhere.error().message.find("stage 'vision'"), std::string::npos);
}

TEST(ImageEncoderStage, BatchOfRequestsIsOneForwardAndEqualsEachItemAlone) {
    auto started = make_stage({{"max_batch_size", Value(8)}});
    // Three requests, four items of three sizes (a two-frame video among them).
    submit(*started.stage, "a", items_data({image_item(1, 1, 4, 4), image_item(2, 2, 4, 6)}));
    submit(*started.stage, "b", items_data({image_item(3, 1, 6, 4)}));
    submit(*started.stage, "c", items_data({image_item(4, 1, 4, 4)}));
    ASSERT_TRUE(started.stage->start().has_value());
    auto results = collect(*started.stage, 3);
    EXPECT_EQ(started.counters->forwards.load(), 1);
    EXPECT_EQ(started.counters->items_computed.load(), 4);

    const auto encoder = reference_encoder();
    const std::vector<std::array<std::int64_t, 4>> all = {
        {1, 1, 4, 4}, {2, 2, 4, 6}, {3, 1, 6, 4}, {4, 1, 4, 4}};
    const auto batched = direct(*encoder, all);  // the stage's own forward: bit for bit
    const std::vector<std::pair<std::string, std::size_t>> where = {
        {"a", 0}, {"a", 1}, {"b", 0}, {"c", 0}};
    for (std::size_t i = 0; i < all.size(); ++i) {
        const auto& [id, index] = where[i];
        ASSERT_TRUE(results.at(id).has_value()) << results.at(id).error().to_string();
        const Map& item = item_of(*results.at(id), index);
        expect_item(item, all[i][0], batched[i], 0.0);
        expect_item(item, all[i][0], direct(*encoder, {all[i]})[0], 1e-5);
    }
    EXPECT_EQ(results.at("a")->data.find("items")->as_list().size(), 2u);
}

TEST(ImageEncoderStage, CacheAnswersRepeatedKeysWithoutComputing) {
    auto started = make_stage();
    ASSERT_TRUE(started.stage->start().has_value());
    submit(*started.stage, "first", items_data({image_item(1, 1, 4, 4), image_item(2, 1, 4, 4)}));
    auto first = collect(*started.stage, 1);
    ASSERT_TRUE(first.at("first").has_value());
    EXPECT_EQ(started.counters->items_computed.load(), 2);

    // One known key, one new: only the new one is computed.
    submit(*started.stage, "second", items_data({image_item(2, 1, 4, 4), image_item(3, 1, 4, 4)}));
    auto second = collect(*started.stage, 1);
    ASSERT_TRUE(second.at("second").has_value());
    EXPECT_EQ(started.counters->forwards.load(), 2);
    EXPECT_EQ(started.counters->items_computed.load(), 3);
    EXPECT_EQ(started.counters->cache_hits.load(), 1);
    EXPECT_EQ(Value(item_of(*second.at("second"), 0)), Value(item_of(*first.at("first"), 1)));

    // Only known keys: no forward at all, identical outputs.
    submit(*started.stage, "third", items_data({image_item(1, 1, 4, 4), image_item(2, 1, 4, 4)}));
    auto third = collect(*started.stage, 1);
    ASSERT_TRUE(third.at("third").has_value());
    EXPECT_EQ(started.counters->forwards.load(), 2);
    EXPECT_EQ(started.counters->cache_hits.load(), 3);
    EXPECT_EQ(third.at("third")->data, first.at("first")->data);

    // The same key with another grid is another item.
    submit(*started.stage, "regrid", items_data({image_item(1, 1, 4, 6)}));
    auto regrid = collect(*started.stage, 1);
    ASSERT_TRUE(regrid.at("regrid").has_value());
    EXPECT_EQ(started.counters->items_computed.load(), 4);
}

TEST(ImageEncoderStage, SameKeyTwiceInOneBatchIsComputedOnce) {
    auto started = make_stage();
    submit(*started.stage, "a", items_data({image_item(5, 1, 4, 4)}));
    submit(*started.stage, "b", items_data({image_item(5, 1, 4, 4), image_item(5, 1, 4, 4)}));
    ASSERT_TRUE(started.stage->start().has_value());
    auto results = collect(*started.stage, 2);
    EXPECT_EQ(started.counters->forwards.load(), 1);
    EXPECT_EQ(started.counters->items_computed.load(), 1);
    ASSERT_TRUE(results.at("a").has_value() && results.at("b").has_value());
    EXPECT_EQ(Value(item_of(*results.at("b"), 0)), Value(item_of(*results.at("a"), 0)));
    EXPECT_EQ(Value(item_of(*results.at("b"), 1)), Value(item_of(*results.at("a"), 0)));
}

TEST(ImageEncoderStage, CacheEvictsLeastRecentlyUsedWithinItsBytes) {
    // A 1x4x4 image: 4 tokens x 32 floats, 4 tensors (embeddings and 3 DeepStack) = 2048 bytes.
    const std::int64_t bound = 5000;  // two entries
    auto started = make_stage({{"cache_bytes", Value(bound)}});
    ASSERT_TRUE(started.stage->start().has_value());
    for (std::int64_t key = 1; key <= 5; ++key) {
        submit(*started.stage, "r" + std::to_string(key), items_data({image_item(key, 1, 4, 4)}));
        auto result = collect(*started.stage, 1);
        ASSERT_TRUE(result.begin()->second.has_value());
        EXPECT_LE(started.counters->cache_bytes.load(), bound);
    }
    EXPECT_EQ(started.counters->cache_bytes.load(), 4096);
    EXPECT_EQ(started.counters->items_computed.load(), 5);
    submit(*started.stage, "recent", items_data({image_item(5, 1, 4, 4), image_item(4, 1, 4, 4)}));
    ASSERT_TRUE(collect(*started.stage, 1).at("recent").has_value());
    EXPECT_EQ(started.counters->items_computed.load(), 5);
    submit(*started.stage, "evicted", items_data({image_item(1, 1, 4, 4)}));
    ASSERT_TRUE(collect(*started.stage, 1).at("evicted").has_value());
    EXPECT_EQ(started.counters->items_computed.load(), 6);
    EXPECT_LE(started.counters->cache_bytes.load(), bound);
}

TEST(ImageEncoderStage, CacheOffComputesEveryTime) {
    auto started = make_stage({{"cache_bytes", Value(0)}});
    ASSERT_TRUE(started.stage->start().has_value());
    for (int round = 0; round < 2; ++round) {
        submit(*started.stage, "r" + std::to_string(round), items_data({image_item(1, 1, 4, 4)}));
        ASSERT_TRUE(collect(*started.stage, 1).begin()->second.has_value());
    }
    EXPECT_EQ(started.counters->items_computed.load(), 2);
    EXPECT_EQ(started.counters->cache_bytes.load(), 0);
}

Value with(Value item, const std::string& field, Value value) {
    item.as_map().insert_or_assign(field, std::move(value));
    return item;
}

Value without(Value item, const std::string& field) {
    item.as_map().erase(field);
    return item;
}

TEST(ImageEncoderStage, MalformedRequestsFailAloneNamingTheItem) {
    auto started = make_stage({{"max_batch_size", Value(64)}, {"max_rows_per_item", Value(64)}});
    const Value good = image_item(1, 1, 4, 4);
    struct Case {
        std::string id;
        Value data;
        std::string expected;  // a part of the message
    };
    const std::vector<Case> cases = {
        {"no_items", Value(Map{}), "data.items is missing"},
        {"items_not_list", Value(Map{{"items", Value(3)}}), "data.items must be a list"},
        {"empty", items_data({}), "data.items is empty"},
        {"item_not_map", items_data({good, Value("image")}), "data.items[1] must be a map"},
        {"no_key", items_data({without(good, "key")}), "data.items[0]: 'key' must be an int"},
        {"string_key", items_data({with(good, "key", Value("k"))}), "'key' must be an int"},
        {"no_pixels", items_data({good, without(good, "pixel_values")}),
         "data.items[1]: 'pixel_values' must be a tensor"},
        {"f64_pixels",
         items_data(
             {with(good, "pixel_values", Value(omni(pattern({16, 1536}, 1).to(at::kDouble))))}),
         "'pixel_values' must be a CPU tensor float32 [rows, 1536], not float64 [16, 1536]"},
        {"narrow_pixels",
         items_data({with(good, "pixel_values", Value(omni(pattern({16, 100}, 1))))}),
         "not [16, 100]"},
        {"no_grid", items_data({without(good, "grid_thw")}), "'grid_thw' must be a tensor"},
        {"i32_grid",
         items_data({with(good, "grid_thw",
                          Value(Tensor::from_vector(std::vector<std::int32_t>{1, 4, 4}, {3})))}),
         "'grid_thw' must be a CPU tensor int64 [3]"},
        {"short_grid",
         items_data({with(good, "grid_thw",
                          Value(Tensor::from_vector(std::vector<std::int64_t>{4, 4}, {2})))}),
         "'grid_thw' must be int64 [3], not [2]"},
        {"negative_grid", items_data({with(good, "grid_thw", Value(grid_tensor(-1, 4, -4)))}),
         "(-1, 4, -4) must have sizes in [1, 65536]"},
        {"odd_grid",
         items_data({with(with(good, "grid_thw", Value(grid_tensor(1, 3, 4))), "pixel_values",
                          Value(omni(pattern({12, 1536}, 1))))}),
         "h and w must be multiples of 2"},
        {"rows_mismatch", items_data({good, with(good, "grid_thw", Value(grid_tensor(1, 4, 2)))}),
         "data.items[1]: 'pixel_values' has 16 rows but 'grid_thw' (1, 4, 2) makes t*h*w = 8"},
        {"huge_rows", items_data({image_item(2, 1, 8, 16)}),
         "'pixel_values' has 128 rows, more than the stage's max_rows_per_item 64"},
    };
    submit(*started.stage, "good_before", items_data({good}));
    for (const Case& c : cases) submit(*started.stage, c.id, c.data);
    submit(*started.stage, "good_after", items_data({image_item(2, 1, 4, 4)}));
    ASSERT_TRUE(started.stage->start().has_value());
    auto results = collect(*started.stage, cases.size() + 2);
    EXPECT_TRUE(results.at("good_before").has_value());
    EXPECT_TRUE(results.at("good_after").has_value());
    for (const Case& c : cases) {
        const auto& result = results.at(c.id);
        ASSERT_FALSE(result.has_value()) << c.id;
        EXPECT_EQ(result.error().code, ErrorCode::invalid_argument) << c.id;
        EXPECT_NE(result.error().message.find(c.expected), std::string::npos)
            << c.id << ": " << result.error().message;
        EXPECT_NE(result.error().message.find("stage 'image_encoder'"), std::string::npos)
            << result.error().message;
    }
    EXPECT_EQ(started.counters->forwards.load(), 1);
    EXPECT_EQ(started.counters->items_computed.load(), 2);
}

TEST(ImageEncoderStage, AbortDuringTheForwardDropsOnlyThatRequest) {
    pipeline::Scheduler* stage = nullptr;
    std::atomic<int> calls = 0;
    auto started = make_stage({}, [&] {
        if (calls.fetch_add(1) == 0) stage->abort("b");
    });
    stage = started.stage.get();
    submit(*stage, "a", items_data({image_item(1, 1, 4, 4)}));
    submit(*stage, "b", items_data({image_item(2, 1, 4, 4)}));
    submit(*stage, "c", items_data({image_item(3, 1, 4, 4)}));
    ASSERT_TRUE(stage->start().has_value());
    auto results = collect(*stage, 2);
    EXPECT_TRUE(results.at("a").has_value());
    EXPECT_TRUE(results.at("c").has_value());
    EXPECT_FALSE(results.contains("b"));
    // b was finished (dropped) before c was delivered: nothing else is left.
    EXPECT_FALSE(stage->outbox().try_pop().has_value());
    EXPECT_EQ(stage->active_requests(), 0u);
    EXPECT_EQ(started.counters->forwards.load(), 1);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

namespace omnirt::models::qwen3_omni {
namespace {

using namespace testing;

// load_format dummy reads only config.json: a directory without weights serves, with seeded
// weights of the config's sizes (the same seed, the same outputs).
TEST(ImageEncoderStage, DummyWeightsNeedOnlyTheConfig) {
    const fs::path directory =
        fs::path(::testing::TempDir()) / ("omnirt-dummy-encoder-" + std::to_string(::getpid()));
    fs::create_directories(directory);
    fs::copy_file(tiny_checkpoint() / "config.json", directory / "config.json",
                  fs::copy_options::overwrite_existing);
    auto run = [&](std::int64_t seed) {
        pipeline::StageContext context = stage_context("image_encoder");
        context.args = Map{{"model_path", Value(directory.string())},
                           {"load_format", Value("dummy")},
                           {"dummy_seed", Value(seed)}};
        auto stage = make_image_encoder_stage(context);
        OMNI_CHECK(stage.has_value(), stage.has_value() ? "" : stage.error().to_string().c_str());
        submit(**stage, "a", items_data({image_item(11, 1, 4, 4)}));
        OMNI_CHECK((*stage)->start().has_value(), "start");
        auto results = collect(**stage, 1);
        OMNI_CHECK(results.at("a").has_value(), "result");
        return torch_of(item_of(*results.at("a"), 0).at("embeddings"));
    };
    const at::Tensor first = run(3);
    EXPECT_EQ(first.sizes(), (std::vector<std::int64_t>{4, 32}));
    EXPECT_TRUE(at::equal(first, run(3)));
    EXPECT_FALSE(at::equal(first, run(4)));
    // Without load_format dummy the missing weights are an error naming what is missing.
    pipeline::StageContext context = stage_context("image_encoder");
    context.args = Map{{"model_path", Value(directory.string())}};
    EXPECT_FALSE(make_image_encoder_stage(context).has_value());
    context.args = Map{{"model_path", Value(directory.string())}, {"load_format", Value("lazy")}};
    auto bad = make_image_encoder_stage(context);
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().message.find("load_format"), std::string::npos);
    fs::remove_all(directory);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

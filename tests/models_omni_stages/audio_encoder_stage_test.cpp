// qwen3_omni.audio_encoder over the tiny checkpoint: a batch of requests is one forward and
// equals the AudioEncoder's own output (and each audio alone), repeated keys come from the cache,
// malformed requests fail alone naming the item.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "models/qwen3_omni/audio_encoder.h"
#include "models/qwen3_omni/encoder_stages.h"
#include "pipeline/stage_factory.h"
#include "stage_harness.h"

namespace omnirt::models::qwen3_omni {
namespace {

using namespace testing;

struct Started {
    std::unique_ptr<pipeline::Scheduler> stage;
    std::shared_ptr<EncoderStageCounters> counters = std::make_shared<EncoderStageCounters>();
};

Started make_stage(Map extra = {}) {
    Started started;
    auto stage = make_audio_encoder_stage(stage_context("audio_encoder", std::move(extra)),
                                          EncoderStageHooks{.counters = started.counters});
    OMNI_CHECK(stage.has_value(), stage.has_value() ? "" : stage.error().to_string().c_str());
    started.stage = std::move(*stage);
    return started;
}

std::vector<at::Tensor> direct(const std::vector<std::pair<std::int64_t, std::int64_t>>& audios) {
    auto checkpoint = open_tiny();
    auto config = audio_encoder_config_of(checkpoint->config());
    OMNI_CHECK(config.has_value(), "audio config");
    auto encoder = AudioEncoder::load(
        *config, [&](const std::string& name) { return checkpoint->tensor(name); });
    OMNI_CHECK(encoder.has_value(), "audio encoder");
    std::vector<at::Tensor> mels;
    for (const auto& [key, frames] : audios) mels.push_back(pattern({128, frames}, key));
    auto out = (*encoder)->forward(mels);
    OMNI_CHECK(out.has_value(), "direct forward");
    return std::move(*out);
}

TEST(AudioEncoderStage, RegisteredWithModelPathInjectable) {
    Registry registry;
    ASSERT_TRUE(register_encoder_stages(registry).has_value());
    auto entry = registry.find(FunctionKind::factory, "qwen3_omni.audio_encoder");
    ASSERT_TRUE(entry.has_value());
    EXPECT_EQ(entry->injectable_args, std::vector<std::string>{"model_path"});
    auto factory = pipeline::find_stage_factory("qwen3_omni.audio_encoder", registry);
    ASSERT_TRUE(factory.has_value());
    auto stage = (*factory)(stage_context("audio_encoder", {{"dtype", Value("bfloat16")}}));
    ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
    submit(**stage, "a", items_data({audio_item(1, 150)}));
    ASSERT_TRUE((*stage)->start().has_value());
    auto results = collect(**stage, 1);
    ASSERT_TRUE(results.at("a").has_value()) << results.at("a").error().to_string();
    const at::Tensor embeddings = torch_of(item_of(*results.at("a"), 0).at("embeddings"));
    EXPECT_EQ(embeddings.scalar_type(), at::kFloat);  // float32 whatever the compute dtype
    EXPECT_EQ(embeddings.size(0), audio_output_length(150));
}

TEST(AudioEncoderStage, BatchOfRequestsIsOneForwardAndEqualsEachAudioAlone) {
    auto started = make_stage();
    submit(*started.stage, "a", items_data({audio_item(1, 250), audio_item(2, 100)}));
    submit(*started.stage, "b", items_data({audio_item(3, 137)}));
    ASSERT_TRUE(started.stage->start().has_value());
    auto results = collect(*started.stage, 2);
    EXPECT_EQ(started.counters->forwards.load(), 1);
    EXPECT_EQ(started.counters->items_computed.load(), 3);

    const std::vector<std::pair<std::int64_t, std::int64_t>> all = {{1, 250}, {2, 100}, {3, 137}};
    const auto batched = direct(all);
    const std::vector<std::pair<std::string, std::size_t>> where = {{"a", 0}, {"a", 1}, {"b", 0}};
    for (std::size_t i = 0; i < all.size(); ++i) {
        const auto& [id, index] = where[i];
        ASSERT_TRUE(results.at(id).has_value()) << results.at(id).error().to_string();
        const Map& item = item_of(*results.at(id), index);
        EXPECT_EQ(item.at("key"), Value(all[i].first));
        const at::Tensor embeddings = torch_of(item.at("embeddings"));
        ASSERT_EQ(embeddings.size(0), audio_output_length(all[i].second));
        EXPECT_TRUE(at::equal(embeddings, batched[i]));
        const at::Tensor alone = direct({all[i]})[0];
        EXPECT_LE((embeddings - alone).abs().max().item<double>(), 1e-5);
    }
}

TEST(AudioEncoderStage, RepeatedKeysComeFromTheCache) {
    auto started = make_stage();
    ASSERT_TRUE(started.stage->start().has_value());
    submit(*started.stage, "first", items_data({audio_item(1, 120)}));
    auto first = collect(*started.stage, 1);
    ASSERT_TRUE(first.at("first").has_value());
    submit(*started.stage, "again", items_data({audio_item(1, 120), audio_item(1, 120)}));
    auto again = collect(*started.stage, 1);
    ASSERT_TRUE(again.at("again").has_value());
    EXPECT_EQ(started.counters->forwards.load(), 1);
    EXPECT_EQ(started.counters->cache_hits.load(), 2);
    EXPECT_EQ(Value(item_of(*again.at("again"), 1)), Value(item_of(*first.at("first"), 0)));
    // The same key with another length is another audio.
    submit(*started.stage, "longer", items_data({audio_item(1, 121)}));
    ASSERT_TRUE(collect(*started.stage, 1).at("longer").has_value());
    EXPECT_EQ(started.counters->forwards.load(), 2);
}

TEST(AudioEncoderStage, MalformedRequestsFailAloneNamingTheItem) {
    auto started = make_stage({{"max_frames_per_item", Value(500)}});
    const Value good = audio_item(1, 60);
    auto with_mel = [&](at::Tensor mel) {
        Value item = good;
        item.as_map().insert_or_assign("mel", Value(omni(mel)));
        return item;
    };
    const std::vector<std::pair<std::string, std::pair<Value, std::string>>> cases = {
        {"empty", {items_data({}), "data.items is empty"}},
        {"no_mel",
         {items_data({good, Value(Map{{"key", Value(2)}})}),
          "data.items[1]: 'mel' must be a tensor"}},
        {"f64",
         {items_data({with_mel(pattern({128, 60}, 1).to(at::kDouble))}), "not float64 [128, 60]"}},
        {"bins",
         {items_data({with_mel(pattern({80, 60}, 1))}),
          "'mel' must be float32 [128, T >= 1], not [80, 60]"}},
        {"no_frames", {items_data({with_mel(at::zeros({128, 0}))}), "not [128, 0]"}},
        {"one_dim",
         {items_data({with_mel(pattern({128}, 1))}),
          "'mel' must be a CPU tensor float32 [128, T]"}},
        {"too_long",
         {items_data({good, audio_item(3, 501)}),
          "data.items[1]: 'mel' has 501 frames, more than the stage's max_frames_per_item 500"}},
    };
    for (const auto& [id, c] : cases) submit(*started.stage, id, c.first);
    submit(*started.stage, "good", items_data({good}));
    ASSERT_TRUE(started.stage->start().has_value());
    auto results = collect(*started.stage, cases.size() + 1);
    EXPECT_TRUE(results.at("good").has_value());
    for (const auto& [id, c] : cases) {
        ASSERT_FALSE(results.at(id).has_value()) << id;
        EXPECT_EQ(results.at(id).error().code, ErrorCode::invalid_argument);
        EXPECT_NE(results.at(id).error().message.find(c.second), std::string::npos)
            << id << ": " << results.at(id).error().message;
    }
    EXPECT_EQ(started.counters->items_computed.load(), 1);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

// The model family registry (models/family.h): lookups by name and arch id, clear errors that
// name the known families, detection from a checkpoint's config.json, and the built-in Qwen3
// family behind it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/builtin_families.h"
#include "models/family.h"

namespace omnirt::models {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

// A private directory, removed with everything in it.
class TempDir {
  public:
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "omnirt-family-XXXXXX").string();
        OMNI_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const fs::path& path() const { return path_; }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(path_ / name) << text;
    }

  private:
    fs::path path_;
};

FamilyRegistry two_families() {
    FamilyRegistry registry;
    EXPECT_TRUE(registry
                    .add({.name = "alpha",
                          .arch_ids = {"alpha", "alpha_moe"},
                          .architectures = {"AlphaForCausalLM"},
                          .serve_by_default = true})
                    .has_value());
    EXPECT_TRUE(registry.add({.name = "beta", .architectures = {"BetaModel"}}).has_value());
    return registry;
}

TEST(FamilyRegistry, FindsByNameAndArchId) {
    const FamilyRegistry registry = two_families();
    auto alpha = registry.find("alpha");
    ASSERT_TRUE(alpha.has_value()) << alpha.error().to_string();
    EXPECT_EQ((*alpha)->name, "alpha");
    auto moe = registry.find("alpha_moe");
    ASSERT_TRUE(moe.has_value());
    EXPECT_EQ(*moe, *alpha);
    auto beta = registry.find("beta");
    ASSERT_TRUE(beta.has_value());
    EXPECT_EQ((*beta)->name, "beta");
    EXPECT_EQ(registry.families().size(), 2u);
    auto fallback = registry.default_family();
    ASSERT_TRUE(fallback.has_value());
    EXPECT_EQ(*fallback, *alpha);
}

TEST(FamilyRegistry, UnknownArchNamesTheKnownFamilies) {
    const FamilyRegistry registry = two_families();
    auto unknown = registry.find("gamma");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
    EXPECT_THAT(unknown.error().message, HasSubstr("unknown arch 'gamma'"));
    EXPECT_THAT(unknown.error().message, HasSubstr("alpha (alpha, alpha_moe), beta"));
    EXPECT_EQ(FamilyRegistry().describe_known(), "none");
}

TEST(FamilyRegistry, RefusesTakenNamesAndASecondDefault) {
    FamilyRegistry registry = two_families();
    auto taken = registry.add({.name = "gamma", .arch_ids = {"alpha_moe"}});
    ASSERT_FALSE(taken.has_value());
    EXPECT_EQ(taken.error().code, ErrorCode::already_exists);
    EXPECT_THAT(taken.error().message, HasSubstr("'alpha_moe' already names the family 'alpha'"));
    auto second_default = registry.add({.name = "gamma", .serve_by_default = true});
    ASSERT_FALSE(second_default.has_value());
    EXPECT_THAT(second_default.error().message, HasSubstr("already the default family"));
    EXPECT_FALSE(registry.add({}).has_value());
    EXPECT_EQ(registry.families().size(), 2u);
    EXPECT_FALSE(FamilyRegistry().default_family().has_value());
}

TEST(FamilyRegistry, DetectsTheFamilyOfACheckpointDirectory) {
    const FamilyRegistry registry = two_families();
    TempDir dir;
    dir.write("config.json", R"({"model_type": "alpha_moe", "hidden_size": 8})");
    auto by_type = registry.detect_directory(dir.path());
    ASSERT_TRUE(by_type.has_value()) << by_type.error().to_string();
    EXPECT_EQ((*by_type)->name, "alpha");
    // No known model_type: the architectures decide.
    dir.write("config.json", R"({"model_type": "custom", "architectures": ["BetaModel"]})");
    auto by_architecture = registry.detect_directory(dir.path());
    ASSERT_TRUE(by_architecture.has_value()) << by_architecture.error().to_string();
    EXPECT_EQ((*by_architecture)->name, "beta");
}

TEST(FamilyRegistry, ACheckpointOfNoKnownFamilyOrABadConfigIsAClearError) {
    const FamilyRegistry registry = two_families();
    TempDir dir;
    auto missing = registry.detect_directory(dir.path());
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_THAT(missing.error().message, HasSubstr("config.json"));

    dir.write("config.json", "{\"model_type\": ");
    auto broken = registry.detect_directory(dir.path());
    ASSERT_FALSE(broken.has_value());
    EXPECT_EQ(broken.error().code, ErrorCode::invalid_argument);
    EXPECT_THAT(broken.error().message, HasSubstr("not valid JSON"));
    EXPECT_THAT(broken.error().message, HasSubstr((dir.path() / "config.json").string()));

    dir.write("config.json", "[1, 2]");
    auto not_object = registry.detect_directory(dir.path());
    ASSERT_FALSE(not_object.has_value());
    EXPECT_EQ(not_object.error().code, ErrorCode::invalid_argument);

    dir.write("config.json", R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})");
    auto unknown = registry.detect_directory(dir.path());
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
    EXPECT_THAT(unknown.error().message, HasSubstr("model_type 'llama'"));
    EXPECT_THAT(unknown.error().message, HasSubstr("LlamaForCausalLM"));
    EXPECT_THAT(unknown.error().message, HasSubstr("known: alpha (alpha, alpha_moe), beta"));
}

TEST(BuiltinFamilies, Qwen3IsRegistered) {
    const FamilyRegistry& families = builtin_families();
    auto qwen3 = families.find("qwen3");
    ASSERT_TRUE(qwen3.has_value()) << qwen3.error().to_string();
    auto moe = families.find("qwen3_moe");
    ASSERT_TRUE(moe.has_value());
    EXPECT_EQ(*moe, *qwen3);
    EXPECT_FALSE((*qwen3)->serve_by_default);
    const ModelFamily& family = **qwen3;
    EXPECT_THAT(family.presets, testing::ElementsAre("tiny", "0.6b", "8b"));
    EXPECT_EQ(family.ar_stage_factory, "qwen3.thinker");
    EXPECT_FALSE(family.serve.pipeline_yaml.empty());
    EXPECT_EQ(family.serve.plugin_file, "libomnirt_qwen3_plugin.so");
    ASSERT_TRUE(family.make_checkpoint && family.render_chat && family.register_stages);
    EXPECT_TRUE(family.register_stages().has_value());
    EXPECT_TRUE(register_family_stages().has_value());
}

// The omni model is what `omnirt serve` runs without arguments: its speech pipeline on the
// generated tiny checkpoint, its stages from its plugin.
TEST(BuiltinFamilies, QwenOmniIsServedByDefault) {
    const FamilyRegistry& families = builtin_families();
    auto fallback = families.default_family();
    ASSERT_TRUE(fallback.has_value()) << fallback.error().to_string();
    const ModelFamily& family = **fallback;
    EXPECT_EQ(family.name, "qwen3_omni");
    EXPECT_NE(family.serve.pipeline_yaml.find("qwen3_omni.talker"), std::string_view::npos);
    EXPECT_EQ(family.serve.plugin_file, "libomnirt_qwen3_omni_plugin.so");
    EXPECT_EQ(family.serve.default_preset, "tiny");
    ASSERT_TRUE(family.voices);
    auto config = family.preset_config("tiny", "float32");
    ASSERT_TRUE(config.has_value());
    EXPECT_THAT(family.voices(*config), testing::ElementsAre("aiden", "chelsie", "ethan"));
    EXPECT_TRUE(family.voices(nlohmann::json::object()).empty());
}

TEST(BuiltinFamilies, Qwen3PresetConfigsAreDetectedAndSized) {
    const ModelFamily& family = **builtin_families().find("qwen3");
    auto config = family.preset_config("tiny", "float32");
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_EQ((*config)["torch_dtype"], "float32");
    auto detected = builtin_families().detect(*config, "tiny");
    ASSERT_TRUE(detected.has_value()) << detected.error().to_string();
    EXPECT_EQ((*detected)->name, "qwen3");
    auto footprint = family.decode_footprint(*config);
    ASSERT_TRUE(footprint.has_value()) << footprint.error().to_string();
    // Dense and tied: every parameter is read by a step (the head is the embedding table).
    EXPECT_GT(footprint->parameters, 0);
    EXPECT_EQ(footprint->dense_elements, footprint->parameters);
    EXPECT_GT(footprint->kv_elements_per_token, 0);
    EXPECT_EQ(footprint->num_experts, 0);
    EXPECT_THAT(footprint->description, HasSubstr("qwen3 hidden 64"));
    auto unknown = family.preset_config("huge", "float32");
    ASSERT_FALSE(unknown.has_value());
}

TEST(BuiltinFamilies, Qwen3RendersChatMessages) {
    const ModelFamily& family = **builtin_families().find("qwen3");
    const Value messages =
        Value(List{Value(Map{{"role", Value("user")}, {"content", Value("Hi")}})});
    auto rendered = family.render_chat(messages, /*add_generation_prompt=*/true, "test");
    ASSERT_TRUE(rendered.has_value()) << rendered.error().to_string();
    EXPECT_EQ(*rendered, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace omnirt::models

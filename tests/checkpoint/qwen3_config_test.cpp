// Qwen3Config: the real config.json files of Qwen3 releases, both key spellings, validation
// errors, presets, expected tensors and the checkpoint check.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint/safetensors_writer.h"
#include "checkpoint/test_support.h"
#include "models/qwen3/config.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "models/qwen3/weights.h"

namespace omnirt::models::qwen3 {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// Qwen/Qwen3-0.6B config.json.
const char* kQwen3_0_6B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen/Qwen3-30B-A3B config.json.
const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
  "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
  "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

TEST(Qwen3Config, ParsesQwen3_0_6B) {
    auto config = parse_qwen3_config(json::parse(kQwen3_0_6B));
    ASSERT_TRUE(config) << config.error().to_string();
    EXPECT_EQ(config->model_type, "qwen3");
    EXPECT_EQ(config->vocab_size, 151936);
    EXPECT_EQ(config->hidden_size, 1024);
    EXPECT_EQ(config->num_hidden_layers, 28);
    EXPECT_EQ(config->q_size(), 2048);  // != hidden_size
    EXPECT_EQ(config->kv_size(), 1024);
    EXPECT_DOUBLE_EQ(config->rope_theta, 1e6);
    EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-6);
    EXPECT_TRUE(config->rope_scaling.is_null());
    EXPECT_TRUE(config->tie_word_embeddings);
    EXPECT_EQ(config->bos_token_id, 151643);
    EXPECT_EQ(config->eos_token_ids, std::vector<std::int64_t>{151645});
    EXPECT_FALSE(config->is_moe());
    EXPECT_EQ(config->weight_dtype(), DType::bf16);
    // The preset is the same model.
    auto preset = qwen3_preset("0.6b");
    ASSERT_TRUE(preset);
    EXPECT_EQ(to_json(*preset), to_json(*config));
}

TEST(Qwen3Config, ParsesQwen3_30B_A3B) {
    auto config = parse_qwen3_config(json::parse(kQwen3_30B_A3B));
    ASSERT_TRUE(config) << config.error().to_string();
    EXPECT_TRUE(config->is_moe());
    EXPECT_EQ(config->num_experts, 128);
    EXPECT_EQ(config->num_experts_per_tok, 8);
    EXPECT_EQ(config->moe_intermediate_size, 768);
    EXPECT_TRUE(config->norm_topk_prob);
    EXPECT_TRUE(config->is_sparse_layer(0));
    EXPECT_TRUE(config->is_sparse_layer(47));
    EXPECT_FALSE(config->has_dense_layer());
    const auto tensors = expected_tensors(*config);
    // embed + 48 * (4 attn + 2 qk norms + router + 128 * 3 experts + 2 norms) + norm + lm_head.
    EXPECT_EQ(tensors.size(), 1u + 48u * (4 + 2 + 1 + 128 * 3 + 2) + 2u);
}

TEST(Qwen3Config, AcceptsTransformersV5SpellingsAndOmniTextConfig) {
    json v5 = json::parse(kQwen3_30B_A3B);
    v5.erase("rope_theta");
    v5.erase("num_experts");
    v5.erase("torch_dtype");
    v5["num_local_experts"] = 64;
    v5["rope_parameters"] = {{"rope_theta", 5e6}, {"rope_type", "default"}};
    v5["dtype"] = "float16";
    v5["eos_token_id"] = {151645, 151643};
    auto config = parse_qwen3_config(v5);
    ASSERT_TRUE(config) << config.error().to_string();
    EXPECT_EQ(config->num_experts, 64);
    EXPECT_DOUBLE_EQ(config->rope_theta, 5e6);
    EXPECT_EQ(config->rope_scaling["rope_type"], "default");
    EXPECT_EQ(config->weight_dtype(), DType::f16);
    EXPECT_EQ(config->eos_token_ids, (std::vector<std::int64_t>{151645, 151643}));

    // The Qwen3-Omni thinker's text_config (fact sheet section 4.1).
    json omni = {
        {"model_type", "qwen3_omni_moe_text"},
        {"vocab_size", 152064},
        {"hidden_size", 2048},
        {"intermediate_size", 768},
        {"num_hidden_layers", 48},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 4},
        {"head_dim", 128},
        {"num_experts", 128},
        {"num_experts_per_tok", 8},
        {"moe_intermediate_size", 768},
        {"norm_topk_prob", true},
        {"decoder_sparse_step", 1},
        {"mlp_only_layers", json::array()},
        {"rope_theta", 1000000},
        {"rms_norm_eps", 1e-6},
        {"max_position_embeddings", 65536},
        {"rope_scaling",
         {{"mrope_section", {24, 20, 20}}, {"interleaved", true}, {"rope_type", "default"}}},
        {"shared_expert_intermediate_size", 0},
        {"use_qk_norm", true}};
    auto thinker = parse_qwen3_config(omni);
    ASSERT_TRUE(thinker) << thinker.error().to_string();
    EXPECT_EQ(thinker->rope_scaling["mrope_section"], json({24, 20, 20}));
    const auto tensors = expected_tensors(*thinker, "thinker.");
    EXPECT_EQ(tensors.front().name, "thinker.model.embed_tokens.weight");
    EXPECT_EQ(tensors.back().name, "thinker.lm_head.weight");
    EXPECT_FALSE(tensors.back().optional);
}

TEST(Qwen3Config, DefaultsFollowTransformers) {
    json minimal = {{"model_type", "qwen3"},  {"vocab_size", 100},
                    {"hidden_size", 64},      {"intermediate_size", 128},
                    {"num_hidden_layers", 1}, {"num_attention_heads", 4}};
    auto config = parse_qwen3_config(minimal);
    ASSERT_TRUE(config) << config.error().to_string();
    EXPECT_EQ(config->num_key_value_heads, 4);
    EXPECT_EQ(config->head_dim, 128);  // Qwen3Config's default
    EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
    EXPECT_EQ(config->max_position_embeddings, 32768);
    EXPECT_FALSE(config->tie_word_embeddings);
    minimal["model_type"] = "qwen3_moe";
    minimal["num_experts"] = 4;
    minimal["num_experts_per_tok"] = 2;
    minimal["moe_intermediate_size"] = 32;
    auto moe = parse_qwen3_config(minimal);
    ASSERT_TRUE(moe) << moe.error().to_string();
    EXPECT_EQ(moe->head_dim, 16);  // hidden_size / heads for qwen3_moe
    EXPECT_EQ(moe->decoder_sparse_step, 1);
}

std::string parse_error(json config) {
    auto parsed = parse_qwen3_config(config);
    EXPECT_FALSE(parsed) << config.dump();
    if (parsed) return "(parsed)";
    EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
    return parsed.error().message;
}

json with(const char* base, std::initializer_list<std::pair<const char*, json>> changes,
          std::initializer_list<const char*> removed = {}) {
    json config = json::parse(base);
    for (const auto& [key, value] : changes) config[key] = value;
    for (const char* key : removed) config.erase(key);
    return config;
}

TEST(Qwen3Config, ClearErrors) {
    EXPECT_THAT(parse_error(json::array()), HasSubstr("must be a JSON object"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"model_type", "llama"}})),
                HasSubstr("model_type \"llama\" is not a Qwen3 text model"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {}, {"hidden_size"})),
                HasSubstr("hidden_size is missing"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"hidden_size", "1024"}})),
                HasSubstr("hidden_size must be an integer, not \"1024\""));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"hidden_size", 1024.5}})),
                HasSubstr("hidden_size must be an integer"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"vocab_size", 0}})),
                HasSubstr("vocab_size must be positive, not 0"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"num_hidden_layers", -2}})),
                HasSubstr("num_hidden_layers must be positive"));
    EXPECT_THAT(
        parse_error(with(kQwen3_0_6B, {{"num_key_value_heads", 3}})),
        HasSubstr("num_attention_heads (16) must be a multiple of num_key_value_heads (3)"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {}, {"head_dim", "hidden_size"})),
                HasSubstr("hidden_size is missing"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {{"hidden_size", 2050}}, {"head_dim"})),
                HasSubstr("head_dim is absent and hidden_size (2050) is not a multiple of "
                          "num_attention_heads (32)"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"head_dim", 127}})), HasSubstr("must be even"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"rms_norm_eps", 0}})),
                HasSubstr("rms_norm_eps must be a positive number"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"rope_theta", "big"}})),
                HasSubstr("rope_theta must be a number"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"tie_word_embeddings", 1}})),
                HasSubstr("tie_word_embeddings must be true or false"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"eos_token_id", 999999}})),
                HasSubstr("eos_token_id 999999 is outside the vocabulary (vocab_size 151936)"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"eos_token_id", json::array({1, "x"})}})),
                HasSubstr("eos_token_id must hold integers"));
    EXPECT_THAT(parse_error(with(kQwen3_0_6B, {{"num_hidden_layers", 100000}})),
                HasSubstr("exceeds the limit"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {}, {"num_experts"})),
                HasSubstr("num_experts is missing"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {}, {"moe_intermediate_size"})),
                HasSubstr("moe_intermediate_size is missing"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {{"num_experts_per_tok", 200}})),
                HasSubstr("num_experts_per_tok (200) exceeds num_experts (128)"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {{"mlp_only_layers", json::array({48})}})),
                HasSubstr("mlp_only_layers names layer 48 but layers are 0..47"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {{"decoder_sparse_step", 0}})),
                HasSubstr("decoder_sparse_step must be positive"));
    EXPECT_THAT(parse_error(with(kQwen3_30B_A3B, {{"mlp_only_layers", json::array({0})},
                                                  {"intermediate_size", 0}})),
                HasSubstr("intermediate_size must be positive"));
}

TEST(Qwen3Config, ToJsonRoundTrips) {
    for (bool moe : {false, true}) {
        auto preset = qwen3_preset("tiny", moe);
        ASSERT_TRUE(preset);
        auto again = parse_qwen3_config(to_json(*preset));
        ASSERT_TRUE(again) << again.error().to_string();
        EXPECT_EQ(to_json(*again), to_json(*preset));
        EXPECT_EQ(to_json(*preset)["architectures"][0],
                  moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM");
    }
    EXPECT_EQ(qwen3_preset("huge").error().code, ErrorCode::not_found);
    EXPECT_THAT(qwen3_preset("0.6b", true).error().message, HasSubstr("no MoE variant"));
}

std::map<std::string, Shape> by_name(const std::vector<checkpoint::ExpectedTensor>& tensors) {
    std::map<std::string, Shape> out;
    for (const auto& t : tensors) out[t.name] = t.shape;
    return out;
}

TEST(ExpectedTensors, TinyDense) {
    auto config = *qwen3_preset("tiny");
    EXPECT_EQ(config.vocab_size, kTinyVocabSize);
    EXPECT_GE(config.vocab_size, kTinyTokenizerSize);
    const auto tensors = expected_tensors(config);
    EXPECT_EQ(tensors.size(), 1u + 2u * 11u + 2u);
    const auto shapes = by_name(tensors);
    EXPECT_EQ(shapes.at("model.embed_tokens.weight"), (Shape{1024, 64}));
    EXPECT_EQ(shapes.at("model.layers.0.self_attn.q_proj.weight"), (Shape{64, 64}));
    EXPECT_EQ(shapes.at("model.layers.1.self_attn.k_proj.weight"), (Shape{32, 64}));
    EXPECT_EQ(shapes.at("model.layers.1.self_attn.v_proj.weight"), (Shape{32, 64}));
    EXPECT_EQ(shapes.at("model.layers.0.self_attn.o_proj.weight"), (Shape{64, 64}));
    EXPECT_EQ(shapes.at("model.layers.0.self_attn.q_norm.weight"), (Shape{16}));
    EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_norm.weight"), (Shape{16}));
    EXPECT_EQ(shapes.at("model.layers.1.mlp.gate_proj.weight"), (Shape{128, 64}));
    EXPECT_EQ(shapes.at("model.layers.1.mlp.up_proj.weight"), (Shape{128, 64}));
    EXPECT_EQ(shapes.at("model.layers.1.mlp.down_proj.weight"), (Shape{64, 128}));
    EXPECT_EQ(shapes.at("model.layers.1.input_layernorm.weight"), (Shape{64}));
    EXPECT_EQ(shapes.at("model.layers.1.post_attention_layernorm.weight"), (Shape{64}));
    EXPECT_EQ(shapes.at("model.norm.weight"), (Shape{64}));
    EXPECT_EQ(shapes.at("lm_head.weight"), (Shape{1024, 64}));
    EXPECT_TRUE(tensors.back().optional);  // tied
    // Dummy specs leave the tied head out and centre norms on 1.
    const auto specs = tensor_specs(config, DType::bf16);
    EXPECT_EQ(specs.size(), tensors.size() - 1);
    for (const auto& spec : specs) {
        EXPECT_EQ(spec.mean, spec.name.ends_with("norm.weight") ? 1.0 : 0.0) << spec.name;
    }
}

TEST(ExpectedTensors, TinyMoeAndAttentionBias) {
    auto config = *qwen3_preset("tiny", true);
    const auto tensors = expected_tensors(config);
    // embed + 2 * (4 attn + 2 qk norms + router + 4 * 3 experts + 2 norms) + norm + lm_head.
    EXPECT_EQ(tensors.size(), 1u + 2u * 21u + 2u);
    const auto shapes = by_name(tensors);
    EXPECT_EQ(shapes.at("model.layers.0.mlp.gate.weight"), (Shape{4, 64}));
    EXPECT_EQ(shapes.at("model.layers.1.mlp.experts.3.gate_proj.weight"), (Shape{64, 64}));
    EXPECT_EQ(shapes.at("model.layers.1.mlp.experts.3.up_proj.weight"), (Shape{64, 64}));
    EXPECT_EQ(shapes.at("model.layers.1.mlp.experts.0.down_proj.weight"), (Shape{64, 64}));
    EXPECT_FALSE(shapes.contains("model.layers.0.mlp.gate_proj.weight"));
    EXPECT_FALSE(tensors.back().optional);  // untied

    config.mlp_only_layers = {1};
    const auto mixed = by_name(expected_tensors(config));
    EXPECT_TRUE(mixed.contains("model.layers.0.mlp.experts.0.up_proj.weight"));
    EXPECT_TRUE(mixed.contains("model.layers.1.mlp.up_proj.weight"));
    config.mlp_only_layers = {};
    config.decoder_sparse_step = 2;  // layers 1, 3, ... sparse
    const auto stepped = by_name(expected_tensors(config));
    EXPECT_TRUE(stepped.contains("model.layers.0.mlp.up_proj.weight"));
    EXPECT_TRUE(stepped.contains("model.layers.1.mlp.gate.weight"));

    config.attention_bias = true;
    const auto biased = by_name(expected_tensors(config));
    EXPECT_EQ(biased.at("model.layers.0.self_attn.q_proj.bias"), (Shape{64}));
    EXPECT_EQ(biased.at("model.layers.0.self_attn.k_proj.bias"), (Shape{32}));
    EXPECT_EQ(biased.at("model.layers.0.self_attn.o_proj.bias"), (Shape{64}));
}

TEST(CheckCheckpoint, ListsMissingUnexpectedAndWrongShapes) {
    checkpoint::testing::TempDir dir;
    auto config = *qwen3_preset("tiny");
    std::vector<checkpoint::TensorSource> sources;
    for (auto spec : tensor_specs(config, DType::f32)) {
        if (spec.name == "model.norm.weight") continue;                               // missing
        if (spec.name == "model.layers.1.self_attn.q_norm.weight") spec.shape = {8};  // wrong
        sources.push_back(checkpoint::dummy_source(spec, {}));
    }
    sources.push_back(checkpoint::dummy_source({.name = "model.extra.weight", .shape = {2}}, {}));
    checkpoint::testing::write_text(dir / "config.json", to_json(config).dump());
    ASSERT_TRUE(checkpoint::write_safetensors(dir / "model.safetensors", sources));
    auto opened = checkpoint::Checkpoint::open(dir.path());
    ASSERT_TRUE(opened);
    auto loaded = load_config(**opened);
    ASSERT_TRUE(loaded);
    auto status = check_checkpoint(*loaded, **opened);
    ASSERT_FALSE(status);
    EXPECT_EQ(status.error().code, ErrorCode::failed_precondition);
    EXPECT_THAT(status.error().message, HasSubstr("1 missing tensor(s): model.norm.weight"));
    EXPECT_THAT(status.error().message,
                HasSubstr("1 tensor(s) of the wrong shape: model.layers.1.self_attn.q_norm.weight "
                          "is [8], expected [16]"));
    EXPECT_THAT(status.error().message, HasSubstr("1 unexpected tensor(s): model.extra.weight"));
    // Only names under the prefix can be unexpected.
    auto report = checkpoint::check_tensors(**opened, expected_tensors(*loaded), "lm_head.");
    EXPECT_TRUE(report.unexpected.empty());
    EXPECT_EQ(report.missing.size(), 1u);

    checkpoint::testing::write_text(dir / "config.json",
                                    R"({"model_type": "qwen3", "vocab_size": 0})");
    auto bad = checkpoint::Checkpoint::open(dir.path());
    ASSERT_TRUE(bad);
    auto bad_config = load_config(**bad);
    ASSERT_FALSE(bad_config);
    EXPECT_THAT(bad_config.error().message, HasSubstr("config.json: Qwen3 config:"));
}

}  // namespace
}  // namespace omnirt::models::qwen3

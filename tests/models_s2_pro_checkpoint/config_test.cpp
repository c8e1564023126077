// S2-Pro config.json: the released tree (fact sheet section 1.2) parses to the released sizes and
// tensor inventory (358 tensors, 4,561,852,416 parameters); hostile configs fail naming the key.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "models/s2_pro/config.h"
#include "models/s2_pro/weights.h"

namespace omnirt::models::s2_pro {
namespace {

using json = nlohmann::json;

// The published config.json as third-party ports reproduce it (fact sheet section 1.2), with the
// keys the runtime ignores (audio_hidden_dim, initializer_range, dropout).
json released_config() {
    return json::parse(R"({
      "architectures": ["FishQwen3OmniForCausalLM"],
      "model_type": "fish_qwen3_omni", "dtype": "bfloat16",
      "eos_token_id": 151645, "pad_token_id": 151669, "audio_pad_token_id": 151677,
      "semantic_start_token_id": 151678, "semantic_end_token_id": 155773,
      "text_config": {"model_type": "fish_qwen3", "dim": 2560, "n_layer": 36, "n_head": 32,
        "n_local_heads": 8, "head_dim": 128, "intermediate_size": 9728, "vocab_size": 155776,
        "max_seq_len": 32768, "rope_base": 1000000, "norm_eps": 1e-6, "attention_qk_norm": true,
        "attention_qkv_bias": false, "attention_o_bias": false, "tie_word_embeddings": true,
        "use_moe": false, "dropout": 0.0, "audio_hidden_dim": 5120,
        "initializer_range": 0.019764235376052372},
      "audio_decoder_config": {"model_type": "fish_qwen3_audio_decoder", "dim": 2560,
        "n_layer": 4, "n_head": 32, "n_local_heads": 8, "head_dim": 128,
        "intermediate_size": 9728, "vocab_size": 4096, "num_codebooks": 10, "text_dim": 2560,
        "max_seq_len": 11, "rope_base": 1000000, "norm_eps": 1e-6, "attention_qk_norm": false,
        "attention_qkv_bias": false, "attention_o_bias": false, "tie_word_embeddings": false}
    })");
}

TEST(S2ProConfigTest, ReleasedConfigParses) {
    auto config = parse_s2_pro_config(released_config());
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_EQ(config->torch_dtype, "bfloat16");
    EXPECT_EQ(config->ids.im_end, 151645);
    EXPECT_EQ(config->ids.semantic_begin, 151678);
    EXPECT_EQ(config->num_codebooks, 10);
    EXPECT_EQ(config->codebook_size, 4096);
    EXPECT_EQ(config->text.dim, 2560);
    EXPECT_EQ(config->text.n_layer, 36);
    EXPECT_TRUE(config->text.attention_qk_norm);
    EXPECT_TRUE(config->text.tie_word_embeddings);
    EXPECT_FALSE(config->audio.attention_qk_norm);
    EXPECT_FALSE(config->audio.tie_word_embeddings);
    EXPECT_EQ(config->audio.max_seq_len, 11);
    EXPECT_DOUBLE_EQ(config->text.rope_base, 1e6);
    const qwen3::Qwen3Config slow = to_qwen3(config->text, config->ids.im_end);
    EXPECT_TRUE(qwen3::validate(slow).has_value());
    EXPECT_EQ(slow.q_size(), 4096);
    EXPECT_EQ(slow.kv_size(), 1024);
}

TEST(S2ProConfigTest, ReleasedInventoryIs358TensorsAnd4561852416Parameters) {
    auto config = parse_s2_pro_config(released_config());
    ASSERT_TRUE(config.has_value());
    const auto tensors = s2_pro_expected_tensors(*config);
    EXPECT_EQ(tensors.size(), 358u);
    EXPECT_EQ(s2_pro_parameter_count(*config), 4561852416);
    std::map<std::string, Shape> shapes;
    for (const auto& tensor : tensors) shapes[tensor.name] = tensor.shape;
    EXPECT_EQ(shapes["text_model.model.embeddings.weight"], (Shape{155776, 2560}));
    EXPECT_EQ(shapes["text_model.model.layers.35.attention.wqkv.weight"], (Shape{6144, 2560}));
    EXPECT_EQ(shapes["text_model.model.layers.0.attention.wo.weight"], (Shape{2560, 4096}));
    EXPECT_EQ(shapes["text_model.model.layers.0.attention.q_norm.weight"], (Shape{128}));
    EXPECT_EQ(shapes["text_model.model.layers.0.feed_forward.w2.weight"], (Shape{2560, 9728}));
    EXPECT_EQ(shapes["audio_decoder.codebook_embeddings.weight"], (Shape{40960, 2560}));
    EXPECT_EQ(shapes["audio_decoder.embeddings.weight"], (Shape{4096, 2560}));
    EXPECT_EQ(shapes["audio_decoder.output.weight"], (Shape{4096, 2560}));
    EXPECT_EQ(shapes["audio_decoder.layers.3.feed_forward.w1.weight"], (Shape{9728, 2560}));
    EXPECT_FALSE(shapes.contains("audio_decoder.layers.0.attention.q_norm.weight"));
    EXPECT_FALSE(shapes.contains("text_model.model.output.weight"));
}

TEST(S2ProConfigTest, PresetsParseAndTheFullOneIsTheRelease) {
    for (const std::string& name : s2_pro_preset_names()) {
        auto preset = s2_pro_preset(name, "bfloat16");
        ASSERT_TRUE(preset.has_value()) << name;
        auto config = parse_s2_pro_config(json(*preset));
        ASSERT_TRUE(config.has_value()) << name << ": " << config.error().to_string();
        EXPECT_EQ(config->text.vocab_size, 155776) << name;
        EXPECT_EQ(config->num_codebooks, 10) << name;
    }
    auto full = parse_s2_pro_config(json(*s2_pro_preset("s2-pro", "bfloat16")));
    ASSERT_TRUE(full.has_value());
    EXPECT_EQ(s2_pro_parameter_count(*full), 4561852416);
    auto unknown = s2_pro_preset("huge", "bfloat16");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
    EXPECT_NE(unknown.error().message.find("tiny"), std::string::npos);
}

struct BadConfig {
    std::string name;
    std::string pointer;  // JSON pointer of the value to replace (or remove with null)
    json value;
    ErrorCode code;
    std::string message;  // a part of the error message
};

void PrintTo(const BadConfig& bad, std::ostream* out) { *out << bad.name; }

class S2ProBadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(S2ProBadConfigTest, FailsNamingTheKey) {
    const BadConfig& bad = GetParam();
    json config = released_config();
    const json::json_pointer pointer(bad.pointer);
    if (bad.value.is_null()) {
        config[pointer.parent_pointer()].erase(pointer.back());
    } else {
        config[pointer] = bad.value;
    }
    auto parsed = parse_s2_pro_config(config);
    ASSERT_FALSE(parsed.has_value());
    EXPECT_EQ(parsed.error().code, bad.code) << parsed.error().to_string();
    EXPECT_NE(parsed.error().message.find(bad.message), std::string::npos)
        << parsed.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Hostile, S2ProBadConfigTest,
    ::testing::Values(
        BadConfig{"model_type", "/model_type", "qwen3", ErrorCode::invalid_argument,
                  "model_type must be \"fish_qwen3_omni\""},
        BadConfig{"no_text_config", "/text_config", nullptr, ErrorCode::invalid_argument,
                  "text_config is missing"},
        BadConfig{"text_config_string", "/text_config", "x", ErrorCode::invalid_argument,
                  "text_config must be an object"},
        BadConfig{"no_dim", "/text_config/dim", nullptr, ErrorCode::invalid_argument,
                  "text_config.dim is missing"},
        BadConfig{"dim_string", "/audio_decoder_config/n_head", "32", ErrorCode::invalid_argument,
                  "audio_decoder_config.n_head must be an integer"},
        BadConfig{"negative_layers", "/text_config/n_layer", -1, ErrorCode::invalid_argument,
                  "text_config.n_layer must be in [1, "},
        BadConfig{"huge_layers", "/text_config/n_layer", 1000000, ErrorCode::invalid_argument,
                  "text_config.n_layer must be in [1, "},
        BadConfig{"kv_heads", "/text_config/n_local_heads", 7, ErrorCode::invalid_argument,
                  "not a multiple of n_local_heads"},
        BadConfig{"odd_head_dim", "/text_config/head_dim", 127, ErrorCode::invalid_argument,
                  "head_dim must be even"},
        BadConfig{"qkv_bias", "/text_config/attention_qkv_bias", true, ErrorCode::unimplemented,
                  "attention biases"},
        BadConfig{"moe", "/audio_decoder_config/use_moe", true, ErrorCode::unimplemented, "MoE"},
        BadConfig{"qk_norm_type", "/text_config/attention_qk_norm", 1, ErrorCode::invalid_argument,
                  "attention_qk_norm must be true or false"},
        BadConfig{"rope_base", "/text_config/rope_base", "big", ErrorCode::invalid_argument,
                  "text_config.rope_base must be a number"},
        BadConfig{"semantic_range", "/semantic_end_token_id", 155000, ErrorCode::invalid_argument,
                  "one id per code"},
        BadConfig{"semantic_outside_vocab", "/text_config/vocab_size", 155000,
                  ErrorCode::invalid_argument, "outside text_config.vocab_size"},
        BadConfig{"project_in", "/audio_decoder_config/text_dim", 1024, ErrorCode::unimplemented,
                  "project_in"},
        BadConfig{"no_codebooks", "/audio_decoder_config/num_codebooks", nullptr,
                  ErrorCode::invalid_argument, "audio_decoder_config.num_codebooks is missing"},
        BadConfig{"short_fast_context", "/audio_decoder_config/max_seq_len", 5,
                  ErrorCode::invalid_argument, "below num_codebooks"}),
    [](const ::testing::TestParamInfo<BadConfig>& info) { return info.param.name; });

TEST(S2ProConfigTest, NotAnObject) {
    auto parsed = parse_s2_pro_config(json::array());
    ASSERT_FALSE(parsed.has_value());
    EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace omnirt::models::s2_pro

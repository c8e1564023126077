// code2wav_config: parsing the released keys, errors that name the key, the output-length
// arithmetic and transformers' chunking rule.
#include "models/qwen3_omni/code2wav_config.h"

#include <gtest/gtest.h>

#include <string>

namespace omnirt::models::qwen3_omni {
namespace {

using json = nlohmann::json;

// code2wav_config as the released config.json has it (fact sheet §7.1), legacy keys included.
json released() {
    return json::parse(R"({
        "attention_bias": false, "codebook_dim": 512, "codebook_size": 2048, "decoder_dim": 1536,
        "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072,
        "layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000,
        "model_type": "qwen3_omni_moe_code2wav", "num_attention_heads": 16,
        "num_hidden_layers": 8, "num_key_value_heads": 16, "num_quantizers": 16,
        "num_semantic_quantizers": 1, "rms_norm_eps": 1e-05, "rope_theta": 10000,
        "semantic_codebook_size": 4096, "sliding_window": 72,
        "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2],
        "vector_quantization_hidden_dimension": 512})");
}

std::string error_of(const json& object) {
    auto config = parse_code2wav_config(object);
    EXPECT_FALSE(config.has_value());
    return config.has_value() ? "" : config.error().to_string();
}

TEST(Code2WavConfigTest, ParsesTheReleasedConfig) {
    auto config = parse_code2wav_config(released());
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_EQ(config->codebook_size, 2048);
    EXPECT_EQ(config->num_quantizers, 16);
    EXPECT_EQ(config->hidden_size, 1024);
    EXPECT_EQ(config->num_hidden_layers, 8);
    EXPECT_EQ(config->head_dim(), 64);
    EXPECT_EQ(config->intermediate_size, 3072);
    EXPECT_EQ(config->sliding_window, 72);
    EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
    EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-5);
    EXPECT_EQ(config->upsampling_ratios, (std::vector<std::int64_t>{2, 2}));
    EXPECT_EQ(config->upsample_rates, (std::vector<std::int64_t>{8, 5, 4, 3}));
    EXPECT_EQ(config->decoder_dim, 1536);
    EXPECT_EQ(config->output_channels(), 96);
    EXPECT_EQ(config->embedding_rows(), 32768);
    EXPECT_EQ(config->total_upsample(), 1920);

    auto again = parse_code2wav_config(to_json(*config));
    ASSERT_TRUE(again.has_value()) << again.error().to_string();
    EXPECT_EQ(to_json(*again), to_json(*config));

    auto nested = code2wav_config_of(json{{"code2wav_config", released()}});
    ASSERT_TRUE(nested.has_value()) << nested.error().to_string();
    EXPECT_EQ(nested->decoder_dim, 1536);
}

TEST(Code2WavConfigTest, AcceptsRopeParameters) {
    json object = released();
    object.erase("rope_theta");
    object["rope_parameters"] = {{"rope_theta", 5000.0}, {"rope_type", "default"}};
    auto config = parse_code2wav_config(object);
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_DOUBLE_EQ(config->rope_theta, 5000.0);
}

TEST(Code2WavConfigTest, EveryRequiredKeyIsNamedWhenMissing) {
    for (const char* key :
         {"codebook_size", "num_quantizers", "hidden_size", "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "intermediate_size", "sliding_window",
          "decoder_dim", "rms_norm_eps", "layer_scale_initial_scale", "upsampling_ratios",
          "upsample_rates", "rope_theta"}) {
        json object = released();
        object.erase(key);
        const std::string error = error_of(object);
        EXPECT_NE(error.find(std::string(key) + " is missing"), std::string::npos) << error;
        EXPECT_NE(error.find("code2wav_config"), std::string::npos) << error;
    }
}

TEST(Code2WavConfigTest, RejectsBadValues) {
    auto with = [](const char* key, json value) {
        json object = released();
        object[key] = std::move(value);
        return object;
    };
    EXPECT_NE(
        error_of(with("decoder_dim", 1000)).find("decoder_dim (1000) must be divisible by 2^4"),
        std::string::npos);
    EXPECT_NE(
        error_of(with("upsample_rates", json::array())).find("upsample_rates must not be empty"),
        std::string::npos);
    EXPECT_NE(error_of(with("upsampling_ratios", json::array()))
                  .find("upsampling_ratios must not be empty"),
              std::string::npos);
    EXPECT_NE(error_of(with("upsample_rates", {8, 0, 4, 3})).find("upsample_rates entries"),
              std::string::npos);
    EXPECT_NE(error_of(with("upsample_rates", "8543")).find("must be a list of integers"),
              std::string::npos);
    EXPECT_NE(error_of(with("upsampling_ratios", {1})).find("at least one sample"),
              std::string::npos);
    EXPECT_NE(error_of(with("hidden_size", 1000)).find("num_attention_heads (16) must divide"),
              std::string::npos);
    EXPECT_NE(error_of(with("num_key_value_heads", 5)).find("must divide num_attention_heads"),
              std::string::npos);
    EXPECT_NE(error_of(with("num_quantizers", 0)).find("num_quantizers must be in [1,"),
              std::string::npos);
    EXPECT_NE(error_of(with("codebook_size", "2048")).find("codebook_size must be an integer"),
              std::string::npos);
    EXPECT_NE(error_of(with("rms_norm_eps", 0.0)).find("rms_norm_eps must be a positive"),
              std::string::npos);
    EXPECT_NE(error_of(json::array()).find("must be an object"), std::string::npos);

    auto act = parse_code2wav_config(with("hidden_act", "gelu"));
    ASSERT_FALSE(act.has_value());
    EXPECT_EQ(act.error().code, ErrorCode::unimplemented);
    auto bias = parse_code2wav_config(with("attention_bias", true));
    ASSERT_FALSE(bias.has_value());
    EXPECT_EQ(bias.error().code, ErrorCode::unimplemented);

    auto absent = code2wav_config_of(json{{"thinker_config", json::object()}});
    ASSERT_FALSE(absent.has_value());
    EXPECT_NE(absent.error().to_string().find("code2wav_config is missing"), std::string::npos);
}

TEST(Code2WavConfigTest, OutputLengths) {
    const Code2WavConfig config;  // the released sizes
    for (std::int64_t frames : {1, 2, 9, 23, 300, 325}) {
        EXPECT_EQ(config.output_samples(frames), 1920 * frames - 555) << frames;
    }
    EXPECT_EQ(config.output_samples(0), 0);
    // §7.2's chain: ((((4T - 1) * 8 - 1) * 5 - 1) * 4 - 1) * 3.
    const std::int64_t t = 23;
    EXPECT_EQ(config.output_samples(t), ((((4 * t - 1) * 8 - 1) * 5 - 1) * 4 - 1) * 3);
    for (std::int64_t frames : {1, 8, 23, 299, 300, 301, 1000}) {
        const std::int64_t chunks = (frames + 299) / 300;
        EXPECT_EQ(chunked_output_samples(config, frames, 300, 25), 1920 * frames - 555 * chunks)
            << frames;
    }
    EXPECT_EQ(chunked_output_samples(config, 23, 8, 5), 1920 * 23 - 555 * 3);

    Code2WavConfig other;
    other.upsampling_ratios = {3};
    other.upsample_rates = {2, 2};
    other.decoder_dim = 64;
    ASSERT_TRUE(validate(other).has_value());
    EXPECT_EQ(other.total_upsample(), 12);
    EXPECT_EQ(other.output_samples(5), ((5 * 3 - 1) * 2 - 1) * 2);
}

TEST(Code2WavConfigTest, ChunkPlanIsTransformersRule) {
    const std::vector<Code2WavChunk> chunks = code2wav_chunks(23, 8, 5);
    ASSERT_EQ(chunks.size(), 3u);
    EXPECT_EQ(chunks[0].begin, 0);
    EXPECT_EQ(chunks[0].end, 8);
    EXPECT_EQ(chunks[0].context, 0);
    EXPECT_EQ(chunks[1].begin, 8);
    EXPECT_EQ(chunks[1].end, 16);
    EXPECT_EQ(chunks[1].context, 5);
    EXPECT_EQ(chunks[1].first_frame(), 3);
    EXPECT_EQ(chunks[1].frames(), 13);
    EXPECT_EQ(chunks[2].end, 23);
    EXPECT_EQ(chunks[2].context, 5);
    // A context longer than what precedes the chunk is cut to it.
    const std::vector<Code2WavChunk> short_start = code2wav_chunks(12, 4, 25);
    ASSERT_EQ(short_start.size(), 3u);
    EXPECT_EQ(short_start[1].context, 4);
    EXPECT_EQ(short_start[2].context, 8);
    EXPECT_TRUE(code2wav_chunks(0, 300, 25).empty());
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

// Parsing thinker_config.audio_config / vision_config: the released checkpoint's values, the
// accepted key spellings, and errors that name the key.
#include "models/qwen3_omni/encoder_config.h"

#include <gtest/gtest.h>

#include <string>

namespace omnirt::models::qwen3_omni {
namespace {

using json = nlohmann::json;

// The released Qwen3-Omni-30B-A3B config.json's encoder objects (fact sheet §2.1, §3.1 and the
// legacy keys of §1.2).
json released_audio() {
    return json::parse(R"({
        "model_type": "qwen3_omni_moe_audio_encoder", "num_mel_bins": 128, "d_model": 1280,
        "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
        "activation_function": "gelu", "downsample_hidden_size": 480, "n_window": 50,
        "n_window_infer": 800, "conv_chunksize": 500, "max_source_positions": 1500,
        "output_dim": 2048, "scale_embedding": false, "dropout": 0.0, "attention_dropout": 0.0
    })");
}

json released_vision() {
    return json::parse(R"({
        "model_type": "qwen3_omni_moe_vision_encoder", "depth": 27, "hidden_size": 1152,
        "num_heads": 16, "intermediate_size": 4304, "hidden_act": "gelu_pytorch_tanh",
        "in_channels": 3, "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2,
        "num_position_embeddings": 2304, "out_hidden_size": 2048,
        "deepstack_visual_indexes": [8, 16, 24], "tokens_per_second": 2,
        "apply_vit_abs_pos_embed": true, "image_size": 768, "spatial_patch_size": 16,
        "in_chans": 3, "initializer_range": 0.02
    })");
}

template <class T>
void expect_error(const Result<T>& result, ErrorCode code, const std::string& fragment) {
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code, code) << result.error().message;
    EXPECT_NE(result.error().message.find(fragment), std::string::npos)
        << result.error().message << " lacks " << fragment;
}

TEST(EncoderConfig, ReadsTheReleasedAudioConfig) {
    auto config = parse_audio_encoder_config(released_audio());
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_EQ(config->d_model, 1280);
    EXPECT_EQ(config->encoder_layers, 32);
    EXPECT_EQ(config->head_dim(), 64);
    EXPECT_EQ(config->output_dim, 2048);
    EXPECT_EQ(config->conv_frequency_bins(), 16);
    EXPECT_EQ(config->conv_out_features(), 7680);
    EXPECT_EQ(config->chunk_tokens(), 13);
    EXPECT_EQ(config->window_tokens(), 104);
}

TEST(EncoderConfig, ReadsTheReleasedVisionConfig) {
    auto config = parse_vision_encoder_config(released_vision());
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_EQ(config->depth, 27);
    EXPECT_EQ(config->head_dim(), 72);
    EXPECT_EQ(config->patch_features(), 1536);
    EXPECT_EQ(config->merged_hidden_size(), 4608);
    EXPECT_EQ(config->position_grid_side(), 48);
    EXPECT_EQ(config->deepstack_visual_indexes, (std::vector<std::int64_t>{8, 16, 24}));
    EXPECT_EQ(config->rope_theta, 10000.0);
    EXPECT_EQ(config->hidden_act, "gelu_pytorch_tanh");
}

TEST(EncoderConfig, ReadsBothFromTheWholeConfig) {
    const json whole = {
        {"model_type", "qwen3_omni_moe"},
        {"thinker_config",
         {{"audio_config", released_audio()}, {"vision_config", released_vision()}}}};
    EXPECT_TRUE(audio_encoder_config_of(whole).has_value());
    EXPECT_TRUE(vision_encoder_config_of(whole).has_value());
    expect_error(audio_encoder_config_of(json{{"thinker_config", json::object()}}),
                 ErrorCode::invalid_argument, "thinker_config.audio_config");
    expect_error(vision_encoder_config_of(json::array()), ErrorCode::invalid_argument,
                 "thinker_config.vision_config");
}

TEST(EncoderConfig, AcceptsOtherSpellings) {
    json audio = released_audio();
    audio.erase("encoder_attention_heads");
    audio["num_attention_heads"] = 10;
    audio.erase("conv_chunksize");
    audio.erase("max_source_positions");
    auto parsed_audio = parse_audio_encoder_config(audio);
    ASSERT_TRUE(parsed_audio.has_value()) << parsed_audio.error().to_string();
    EXPECT_EQ(parsed_audio->encoder_attention_heads, 10);
    EXPECT_EQ(parsed_audio->conv_chunksize, 500);

    json vision = released_vision();
    vision.erase("in_channels");
    vision["in_chans"] = 1;
    vision.erase("patch_size");  // the legacy spatial_patch_size stands in
    vision["rope_parameters"] = {{"rope_theta", 5000.0}};
    auto parsed_vision = parse_vision_encoder_config(vision);
    ASSERT_TRUE(parsed_vision.has_value()) << parsed_vision.error().to_string();
    EXPECT_EQ(parsed_vision->in_channels, 1);
    EXPECT_EQ(parsed_vision->patch_size, 16);
    EXPECT_EQ(parsed_vision->rope_theta, 5000.0);
    // to_json round-trips.
    auto again = parse_vision_encoder_config(to_json(*parsed_vision));
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->in_channels, 1);
    EXPECT_TRUE(parse_audio_encoder_config(to_json(*parsed_audio)).has_value());
}

TEST(EncoderConfig, AudioErrorsNameTheKey) {
    for (const char* key : {"d_model", "encoder_layers", "output_dim", "n_window", "num_mel_bins",
                            "encoder_ffn_dim", "downsample_hidden_size", "n_window_infer"}) {
        json audio = released_audio();
        audio.erase(key);
        expect_error(parse_audio_encoder_config(audio), ErrorCode::invalid_argument,
                     std::string(key) + " is missing");
    }
    auto with = [](const char* key, json value) {
        json audio = released_audio();
        audio[key] = std::move(value);
        return parse_audio_encoder_config(audio);
    };
    expect_error(with("d_model", -1280), ErrorCode::invalid_argument, "d_model must be in");
    expect_error(with("d_model", "1280"), ErrorCode::invalid_argument, "must be an integer");
    expect_error(with("encoder_layers", 0), ErrorCode::invalid_argument, "encoder_layers");
    expect_error(with("encoder_attention_heads", 7), ErrorCode::invalid_argument, "multiple");
    expect_error(with("n_window_infer", 99), ErrorCode::invalid_argument, "n_window_infer");
    expect_error(with("max_source_positions", 12), ErrorCode::invalid_argument,
                 "max_source_positions");
    expect_error(with("activation_function", "relu"), ErrorCode::unimplemented, "relu");
    expect_error(with("scale_embedding", true), ErrorCode::unimplemented, "scale_embedding");
    expect_error(with("scale_embedding", 1), ErrorCode::invalid_argument, "true or false");
    expect_error(parse_audio_encoder_config(json::array()), ErrorCode::invalid_argument,
                 "audio_config");
}

TEST(EncoderConfig, VisionErrorsNameTheKey) {
    for (const char* key : {"depth", "hidden_size", "num_heads", "out_hidden_size",
                            "deepstack_visual_indexes", "num_position_embeddings"}) {
        json vision = released_vision();
        vision.erase(key);
        expect_error(parse_vision_encoder_config(vision), ErrorCode::invalid_argument,
                     std::string(key) + " is missing");
    }
    auto with = [](const char* key, json value) {
        json vision = released_vision();
        vision[key] = std::move(value);
        return parse_vision_encoder_config(vision);
    };
    expect_error(with("hidden_size", -4), ErrorCode::invalid_argument, "hidden_size");
    expect_error(with("num_position_embeddings", 2300), ErrorCode::invalid_argument, "square");
    expect_error(with("deepstack_visual_indexes", json{8, 27}), ErrorCode::invalid_argument,
                 "outside the blocks");
    expect_error(with("deepstack_visual_indexes", json{8, 8}), ErrorCode::invalid_argument,
                 "twice");
    expect_error(with("deepstack_visual_indexes", 8), ErrorCode::invalid_argument,
                 "list of integers");
    expect_error(with("num_heads", 128), ErrorCode::invalid_argument, "multiple of 4");
    expect_error(with("rope_theta", -1.0), ErrorCode::invalid_argument, "rope_theta");
    expect_error(with("hidden_act", "silu"), ErrorCode::unimplemented, "silu");
    expect_error(with("spatial_merge_size", 0), ErrorCode::invalid_argument, "spatial_merge_size");
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

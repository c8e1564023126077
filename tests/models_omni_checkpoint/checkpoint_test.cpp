// Generated Qwen3-Omni checkpoints: the released layout (nested config, sharded safetensors with
// an index, real tensor names and counts, special tokens at their real ids) and the config
// checks, with hostile configs.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/test_support.h"
#include "models/builtin_families.h"
#include "models/qwen3_omni/make_checkpoint.h"
#include "models/qwen3_omni/omni_weights.h"
#include "text/tokenizer.h"

namespace omnirt::models::qwen3_omni {
namespace {

using json = nlohmann::json;

json preset_json(const std::string& name) {
    auto preset = omni_preset(name, "bfloat16");
    OMNI_CHECK(preset.has_value(), "preset");
    return json(*preset);
}

json read_json(const std::filesystem::path& path) {
    std::ifstream file(path);
    return json::parse(file);
}

TEST(OmniCheckpointTest, FullPresetListsTheReleasedTensorsAndParameters) {
    // Qwen3-Omni-30B-A3B-Instruct: 28,010 tensors, 35,259,818,545 parameters (fact sheet 1.3).
    auto config = parse_omni_config(preset_json("30b-a3b"));
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    auto tensors = omni_expected_tensors(*config);
    ASSERT_TRUE(tensors.has_value()) << tensors.error().to_string();
    EXPECT_EQ(tensors->size(), 28010u);
    std::int64_t parameters = 0;
    for (const auto& tensor : *tensors) {
        std::int64_t count = 1;
        for (std::int64_t size : tensor.shape) count *= size;
        parameters += count;
    }
    EXPECT_EQ(parameters, 35259818545);
}

TEST(OmniCheckpointTest, FullPresetHasTheReleasedShapes) {
    auto config = parse_omni_config(preset_json("30b-a3b"));
    ASSERT_TRUE(config.has_value());
    auto tensors = omni_expected_tensors(*config);
    ASSERT_TRUE(tensors.has_value());
    std::map<std::string, Shape> shapes;
    for (const auto& tensor : *tensors) shapes[tensor.name] = tensor.shape;
    EXPECT_EQ(shapes["thinker.audio_tower.conv_out.weight"], (Shape{1280, 7680}));
    EXPECT_EQ(shapes["thinker.visual.patch_embed.proj.weight"], (Shape{1152, 3, 2, 16, 16}));
    EXPECT_EQ(shapes["thinker.visual.merger_list.2.ln_q.weight"], (Shape{4608}));
    EXPECT_EQ(shapes["thinker.visual.merger.ln_q.weight"], (Shape{1152}));
    EXPECT_EQ(shapes["thinker.model.layers.47.mlp.experts.127.down_proj.weight"],
              (Shape{2048, 768}));
    EXPECT_EQ(shapes["thinker.lm_head.weight"], (Shape{152064, 2048}));
    EXPECT_EQ(shapes["talker.model.layers.19.mlp.shared_expert_gate.weight"], (Shape{1, 1024}));
    EXPECT_EQ(shapes["talker.codec_head.weight"], (Shape{3072, 1024}));
    EXPECT_EQ(shapes["talker.hidden_projection.linear_fc1.weight"], (Shape{2048, 2048}));
    EXPECT_EQ(shapes["talker.code_predictor.model.codec_embedding.14.weight"], (Shape{2048, 1024}));
    EXPECT_EQ(shapes["talker.code_predictor.lm_head.14.weight"], (Shape{2048, 1024}));
    EXPECT_EQ(shapes["code2wav.code_embedding.weight"], (Shape{32768, 1024}));
    EXPECT_EQ(shapes["code2wav.upsample.1.0.conv.weight"], (Shape{1024, 1024, 2}));
    EXPECT_EQ(shapes["code2wav.decoder.1.block.1.conv.weight"], (Shape{1536, 768, 16}));
    EXPECT_EQ(shapes["code2wav.decoder.4.block.1.conv.weight"], (Shape{192, 96, 6}));
    EXPECT_EQ(shapes["code2wav.decoder.5.alpha"], (Shape{96}));
    EXPECT_EQ(shapes["code2wav.decoder.6.conv.weight"], (Shape{1, 96, 7}));
}

TEST(OmniCheckpointTest, TinyCheckpointHasTheReleasedLayout) {
    checkpoint::testing::TempDir directory;
    auto made = make_checkpoint(directory.path(), {.preset = "tiny", .seed = 1});
    ASSERT_TRUE(made.has_value()) << made.error().to_string();
    EXPECT_TRUE(made->weights.sharded);
    for (const char* file :
         {"config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json",
          "preprocessor_config.json", "generation_config.json"}) {
        EXPECT_TRUE(std::filesystem::exists(directory.path() / file)) << file;
    }
    auto opened = checkpoint::Checkpoint::open(directory.path());
    ASSERT_TRUE(opened.has_value()) << opened.error().to_string();
    auto config = parse_omni_config((*opened)->config());
    ASSERT_TRUE(config.has_value()) << config.error().to_string();
    EXPECT_TRUE(check_omni_checkpoint(*config, **opened).has_value());
    EXPECT_EQ(config->ids.image, 151655);
    EXPECT_EQ(config->ids.audio, 151675);
    EXPECT_EQ(config->thinker_text.vocab_size, 152064);
    EXPECT_EQ(config->thinker_text.model_type, "qwen3_omni_moe_text");
    const json on_disk = read_json(directory.path() / "config.json");
    EXPECT_EQ(on_disk["architectures"][0], "Qwen3OmniMoeForConditionalGeneration");
    EXPECT_EQ(on_disk["talker_config"]["speaker_id"]["ethan"], 2302);
    EXPECT_EQ(on_disk["talker_config"]["codec_eos_token_id"], 2150);
    const json pre = read_json(directory.path() / "preprocessor_config.json");
    EXPECT_EQ(pre["feature_size"], 128);
    EXPECT_EQ(pre["patch_size"], 16);

    // The family is found from the directory, and the same seed gives the same bytes.
    auto family = builtin_families().detect_directory(directory.path());
    ASSERT_TRUE(family.has_value()) << family.error().to_string();
    EXPECT_EQ((*family)->name, "qwen3_omni");
}

TEST(OmniCheckpointTest, TokenizerHasTheOmniTokensAtTheirRealIds) {
    const OmniTokenizerFiles files = omni_tokenizer_files();
    auto tokenizer = text::Tokenizer::from_json(files.tokenizer.dump());
    ASSERT_TRUE(tokenizer.has_value()) << tokenizer.error().to_string();
    const std::pair<const char*, std::int64_t> specials[] = {
        {"<|endoftext|>", 151643},    {"<|im_start|>", 151644},    {"<|im_end|>", 151645},
        {"<|vision_start|>", 151652}, {"<|vision_end|>", 151653},  {"<|image_pad|>", 151655},
        {"<|video_pad|>", 151656},    {"<|audio_start|>", 151669}, {"<|audio_end|>", 151670},
        {"<tts_pad>", 151671},        {"<|audio_pad|>", 151675}};
    for (const auto& [text, id] : specials) {
        auto ids = (*tokenizer)->encode(text);
        ASSERT_TRUE(ids.has_value()) << text;
        ASSERT_EQ(ids->size(), 1u) << text;
        EXPECT_EQ((*ids)[0], id) << text;
    }
    // Role words are single tokens of this tokenizer, and the config names them.
    for (std::int64_t role :
         {files.role_ids.system, files.role_ids.user, files.role_ids.assistant}) {
        EXPECT_LT(role, 151643);
    }
    auto user = (*tokenizer)->encode("user");
    ASSERT_TRUE(user.has_value());
    ASSERT_EQ(user->size(), 1u);
    EXPECT_EQ((*user)[0], files.role_ids.user);
}

TEST(OmniCheckpointTest, MissingOrWrongTensorsAreReported) {
    checkpoint::testing::TempDir directory;
    ASSERT_TRUE(make_checkpoint(directory.path(), {.preset = "tiny"}).has_value());
    json config = read_json(directory.path() / "config.json");
    config["thinker_config"]["vision_config"]["depth"] = 5;  // one block more than stored
    auto parsed = parse_omni_config(config);
    ASSERT_TRUE(parsed.has_value());
    auto opened = checkpoint::Checkpoint::open(directory.path());
    ASSERT_TRUE(opened.has_value());
    auto checked = check_omni_checkpoint(*parsed, **opened);
    ASSERT_FALSE(checked.has_value());
    EXPECT_NE(checked.error().message.find("thinker.visual.blocks.4."), std::string::npos)
        << checked.error().message;
}

TEST(OmniCheckpointTest, HostileConfigsGetClearErrors) {
    const json good = preset_json("tiny");
    auto expect_error = [](const json& config, const std::string& needle) {
        auto parsed = parse_omni_config(config);
        if (parsed.has_value()) {
            auto tensors = omni_expected_tensors(*parsed);
            ASSERT_FALSE(tensors.has_value()) << needle;
            EXPECT_NE(tensors.error().message.find(needle), std::string::npos)
                << tensors.error().message;
            return;
        }
        EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
    };
    expect_error(json::array(), "JSON object");
    json wrong_type = good;
    wrong_type["model_type"] = "qwen3";
    expect_error(wrong_type, "model_type");
    json no_thinker = good;
    no_thinker.erase("thinker_config");
    expect_error(no_thinker, "thinker_config");
    json no_talker = good;
    no_talker.erase("talker_config");
    expect_error(no_talker, "talker_config");
    json bad_id = good;
    bad_id["thinker_config"]["image_token_id"] = 999999999;
    expect_error(bad_id, "outside the thinker vocabulary");
    json negative_id = good;
    negative_id["tts_pad_token_id"] = -1;
    expect_error(negative_id, "tts_pad_token_id");
    json bad_text = good;
    bad_text["thinker_config"]["text_config"]["hidden_size"] = "wide";
    expect_error(bad_text, "thinker_config.text_config");
    json bad_audio = good;
    bad_audio["thinker_config"]["audio_config"]["d_model"] = 0;
    expect_error(bad_audio, "audio_config.d_model");
    json bad_vision = good;
    bad_vision["thinker_config"]["vision_config"]["deepstack_visual_indexes"] = "x";
    expect_error(bad_vision, "deepstack_visual_indexes");
    json bad_groups = good;
    bad_groups["talker_config"]["code_predictor_config"]["num_code_groups"] = 1;
    expect_error(bad_groups, "num_code_groups");
    json bad_wav = good;
    bad_wav["code2wav_config"]["decoder_dim"] = 24;  // cannot halve four times
    expect_error(bad_wav, "decoder_dim");
    // Without audio output the talker and code2wav may be absent.
    json thinker_only = good;
    thinker_only["enable_audio_output"] = false;
    thinker_only.erase("talker_config");
    thinker_only.erase("code2wav_config");
    auto parsed = parse_omni_config(thinker_only);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
    auto tensors = omni_expected_tensors(*parsed);
    ASSERT_TRUE(tensors.has_value());
    for (const auto& tensor : *tensors)
        EXPECT_TRUE(tensor.name.starts_with("thinker.")) << tensor.name;
}

TEST(OmniCheckpointTest, UnknownPresetAndMoeFlagAreRefused) {
    EXPECT_EQ(omni_preset("huge", "bfloat16").error().code, ErrorCode::not_found);
    auto family = builtin_families().find("qwen3_omni");
    ASSERT_TRUE(family.has_value());
    checkpoint::testing::TempDir directory;
    auto made = (*family)->make_checkpoint(directory.path(),
                                           {.arch = "qwen3_omni", .preset = "tiny", .moe = true});
    ASSERT_FALSE(made.has_value());
    EXPECT_NE(made.error().message.find("--moe"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

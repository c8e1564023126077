// Checks placeholder expansion and the M-RoPE position ids against rope_goldens.json: values
// derived by hand from transformers' algorithm as committed ("source": "hand-derived"), or
// transformers' own output once gen_rope_goldens.py has been run on a machine that has it.
// Skips, saying why, when the file is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/qwen3_omni/placeholders.h"
#include "models/qwen3_omni/rope_index.h"

namespace omnirt::models::qwen3_omni {
namespace {

using nlohmann::json;

const std::filesystem::path kGoldens =
    std::filesystem::path(OMNIRT_SOURCE_DIR) / "tests/models_omni_layout/rope_goldens.json";

LayoutConfig config_from(const json& j) {
    return LayoutConfig{
        .image_token_id = j.at("image_token_id").get<std::int64_t>(),
        .video_token_id = j.at("video_token_id").get<std::int64_t>(),
        .audio_token_id = j.at("audio_token_id").get<std::int64_t>(),
        .vision_start_token_id = j.at("vision_start_token_id").get<std::int64_t>(),
        .vision_end_token_id = j.at("vision_end_token_id").get<std::int64_t>(),
        .audio_start_token_id = j.at("audio_start_token_id").get<std::int64_t>(),
        .audio_end_token_id = j.at("audio_end_token_id").get<std::int64_t>(),
        .position_id_per_seconds = j.at("position_id_per_seconds").get<double>(),
        .spatial_merge_size = j.at("spatial_merge_size").get<std::int64_t>(),
    };
}

GridThw grid_from(const json& j) {
    return {.t = j.at(0).get<std::int64_t>(),
            .h = j.at(1).get<std::int64_t>(),
            .w = j.at(2).get<std::int64_t>()};
}

MediaItems media_from(const json& items) {
    MediaItems media;
    for (const json& item : items) {
        const std::string kind = item.at("kind").get<std::string>();
        if (kind == "image") {
            media.images.push_back(grid_from(item.at("grid_thw")));
        } else if (kind == "audio") {
            media.audio_mel_frames.push_back(item.at("mel_frames").get<std::int64_t>());
        } else {
            VideoItem video{.grid = grid_from(item.at("grid_thw")),
                            .second_per_grid = item.value("second_per_grid", 2.0)};
            if (item.contains("audio_mel_frames")) {
                video.audio_mel_frames = item.at("audio_mel_frames").get<std::int64_t>();
            }
            media.videos.push_back(video);
        }
    }
    return media;
}

TEST(RopeGoldens, ExpansionAndPositionsMatchTheFile) {
    if (!std::filesystem::exists(kGoldens)) GTEST_SKIP() << "no goldens at " << kGoldens;
    std::ifstream in(kGoldens);
    const json doc = json::parse(in);
    const std::string source = doc.at("source").get<std::string>();
    std::cout << "rope goldens: " << source << "\n";
    RecordProperty("source", source);
    const LayoutConfig config = config_from(doc.at("config"));
    ASSERT_FALSE(doc.at("cases").empty());
    for (const json& golden : doc.at("cases")) {
        SCOPED_TRACE(golden.at("name").get<std::string>());
        const auto prompt = golden.at("prompt_ids").get<std::vector<std::int64_t>>();
        const MediaItems media = media_from(golden.at("media"));
        const auto expanded = expand_placeholders(prompt, media, config);
        ASSERT_TRUE(expanded.has_value()) << expanded.error().to_string();
        EXPECT_EQ(expanded->token_ids, golden.at("expanded_ids").get<std::vector<std::int64_t>>());

        const auto index = compute_rope_index(expanded->token_ids, media, config);
        ASSERT_TRUE(index.has_value()) << index.error().to_string();
        for (std::size_t axis = 0; axis < 3; ++axis) {
            // JSON numbers are float32 values written exactly, so the comparison is exact.
            EXPECT_EQ(index->positions[axis],
                      golden.at("position_ids").at(axis).get<std::vector<float>>())
                << "axis " << axis;
        }
        EXPECT_EQ(index->rope_delta, golden.at("rope_delta").get<float>());
    }
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

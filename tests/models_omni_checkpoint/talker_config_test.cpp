// talker_config: the talker side of a Qwen3-Omni config.json (presets and hostile values), the
// speakers, the suppressed codec ids, and the talker's prefill plan against hand-built prompts
// (qwen3-omni.md §5.4: system turns and earlier assistant turns dropped, user turns kept with
// their positions re-based, nine assistant rows).
#include <gtest/gtest.h>

#include "models/qwen3_omni/omni_config.h"
#include "models/qwen3_omni/talker_config.h"

namespace omnirt::models::qwen3_omni {
namespace {

OmniConfig preset(const std::string& name) {
    auto json = omni_preset(name, "bfloat16");
    OMNI_CHECK(json.has_value(), "preset");
    auto parsed = parse_omni_config(nlohmann::json(*json));
    OMNI_CHECK(parsed.has_value(), "parse");
    return *parsed;
}

TEST(TalkerConfigTest, PresetsParseWithTheReleasedValues) {
    auto real = parse_talker_config(preset("30b-a3b"));
    ASSERT_TRUE(real.has_value()) << real.error().to_string();
    EXPECT_EQ(real->text.num_hidden_layers, 20);
    EXPECT_EQ(real->text.hidden_size, 1024);
    EXPECT_EQ(real->text.num_experts, 128);
    EXPECT_EQ(real->text.num_experts_per_tok, 6);
    EXPECT_EQ(real->text.shared_expert_intermediate_size, 768);
    EXPECT_TRUE(real->text.norm_topk_prob);
    EXPECT_EQ(real->text.vocab_size, 3072);
    EXPECT_EQ(real->predictor.num_hidden_layers, 5);
    EXPECT_EQ(real->predictor.num_key_value_heads, 8);
    EXPECT_EQ(real->predictor.vocab_size, 2048);
    EXPECT_EQ(real->num_code_groups, 16);
    EXPECT_EQ(real->residual_codes(), 15);
    EXPECT_EQ(real->accept_hidden_layer, 24);
    EXPECT_EQ(real->thinker_hidden_size, 2048);
    EXPECT_EQ(real->codec.pad, 2148);
    EXPECT_EQ(real->codec.bos, 2149);
    EXPECT_EQ(real->codec.eos, 2150);
    EXPECT_EQ(real->codec.nothink, 2155);
    EXPECT_EQ(real->codec.think_bos, 2156);
    EXPECT_EQ(real->codec.think_eos, 2157);
    EXPECT_EQ(real->speakers.at("ethan"), 2302);
    auto tiny = parse_talker_config(preset("tiny"));
    ASSERT_TRUE(tiny.has_value()) << tiny.error().to_string();
    EXPECT_EQ(tiny->accept_hidden_layer, 2);
}

TEST(TalkerConfigTest, SpeakersAndSuppressedIds) {
    auto config = parse_talker_config(preset("tiny"));
    ASSERT_TRUE(config.has_value());
    EXPECT_EQ(*speaker_codec_id(*config, ""), 2302);  // ethan, transformers' default
    EXPECT_EQ(*speaker_codec_id(*config, "Chelsie"), 2301);
    EXPECT_EQ(*speaker_codec_id(*config, "AIDEN"), 2303);
    auto unknown = speaker_codec_id(*config, "alloy");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(unknown.error().message.find("aiden, chelsie, ethan"), std::string::npos);
    const auto suppressed = suppressed_codec_ids(*config);
    EXPECT_EQ(suppressed.size(), 1023u);
    EXPECT_EQ(suppressed.front(), 2048);
    EXPECT_EQ(suppressed.back(), 3071);
    EXPECT_EQ(std::count(suppressed.begin(), suppressed.end(), 2150), 0);
}

TEST(TalkerConfigTest, HostileConfigsAreRefusedNamingTheKey) {
    const OmniConfig base = preset("tiny");
    auto refused = [&](auto edit, const std::string& needle) {
        OmniConfig config = base;
        edit(config.talker_config);
        auto parsed = parse_talker_config(config);
        ASSERT_FALSE(parsed.has_value()) << needle;
        EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
    };
    refused([](nlohmann::json& t) { t.erase("accept_hidden_layer"); }, "accept_hidden_layer");
    refused([](nlohmann::json& t) { t["accept_hidden_layer"] = 99; }, "accept_hidden_layer");
    refused([](nlohmann::json& t) { t["accept_hidden_layer"] = "2"; }, "accept_hidden_layer");
    refused([](nlohmann::json& t) { t["num_code_groups"] = 1; }, "num_code_groups");
    refused([](nlohmann::json& t) { t["codec_eos_token_id"] = 5000; }, "codec id 5000");
    refused([](nlohmann::json& t) { t["speaker_id"] = nlohmann::json::object(); }, "speaker_id");
    refused([](nlohmann::json& t) { t["speaker_id"]["x"] = -1; }, "speaker_id.x");
    refused([](nlohmann::json& t) { t["text_config"] = 3; }, "text_config");
    refused([](nlohmann::json& t) { t["text_config"].erase("num_experts"); }, "num_experts");
    refused([](nlohmann::json& t) { t["code_predictor_config"]["hidden_size"] = 64; },
            "hidden_size");
    refused([](nlohmann::json& t) { t["thinker_hidden_size"] = 7; }, "thinker_hidden_size");
    OmniConfig none = base;
    none.talker_config = nullptr;
    EXPECT_EQ(parse_talker_config(none).error().code, ErrorCode::failed_precondition);
}

// ids: S = <|im_start|>, E = <|im_end|>, roles, n = "\n", t = text, P = image pad.
struct Ids {
    OmniTokenIds ids;
    std::int32_t S = static_cast<std::int32_t>(ids.im_start);
    std::int32_t E = static_cast<std::int32_t>(ids.im_end);
    std::int32_t sys = static_cast<std::int32_t>(ids.system);
    std::int32_t user = static_cast<std::int32_t>(ids.user);
    std::int32_t bot = static_cast<std::int32_t>(ids.assistant);
    std::int32_t vs = static_cast<std::int32_t>(ids.vision_start);
    std::int32_t ve = static_cast<std::int32_t>(ids.vision_end);
    std::int32_t P = static_cast<std::int32_t>(ids.image);
    std::int32_t n = 198;
    std::int32_t t = 300;
};

TEST(TalkerPrefillPlanTest, HandBuiltConversation) {
    const Ids k;
    // row: 0-4 system, 5-15 user with a 2x2 image (4 pads), 16-19 an earlier assistant turn,
    // 20-23 a second user turn, 24-26 the generation prompt.
    const std::vector<std::int32_t> prompt = {k.S, k.sys,  k.n,  k.t,  k.E,  // 0..4
                                              k.S, k.user, k.n,  k.vs, k.P, k.P,
                                              k.P, k.P,    k.ve, k.t,  k.E,  // 5..15
                                              k.S, k.bot,  k.t,  k.E,        // 16..19
                                              k.S, k.user, k.t,  k.E,        // 20..23
                                              k.S, k.bot,  k.n};             // 24..26
    // Thinker positions (get_rope_index): text advances by 1; the image's grid (t 1, h 2, w 2)
    // starts at 9: T 9, H 9/9/10/10, W 9/10/9/10; vision_end at 11.
    std::vector<std::vector<std::int64_t>> positions(3, std::vector<std::int64_t>(prompt.size()));
    std::int64_t next = 0;
    for (std::size_t row = 0; row < prompt.size(); ++row) {
        if (row >= 9 && row <= 12) {
            const std::int64_t k2 = static_cast<std::int64_t>(row) - 9;
            positions[0][row] = 9;
            positions[1][row] = 9 + k2 / 2;
            positions[2][row] = 9 + k2 % 2;
            if (row == 12) next = 11;
            continue;
        }
        for (auto& axis : positions) axis[row] = next;
        ++next;
    }
    auto plan = plan_talker_prefill(prompt, positions, k.ids);
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    // Kept: the two user turns; dropped: the system turn and the earlier assistant turn.
    std::vector<std::int64_t> rows;
    for (std::int64_t r = 5; r <= 15; ++r) rows.push_back(r);
    for (std::int64_t r = 20; r <= 23; ++r) rows.push_back(r);
    EXPECT_EQ(plan->user_rows, rows);
    EXPECT_EQ(plan->assistant_begin, 24);
    EXPECT_EQ(plan->prompt_rows(), 15 + 9);
    // The first user turn now starts at 0: S user n vs = 0..3, the image T 4 / H 4,4,5,5 /
    // W 4,5,4,5, vision_end 6, text 7, E 8; the second turn 9..12; the assistant rows 13..21.
    const std::vector<std::int64_t> t_axis = {0,  1,  2,  3,  4,  4,  4,  4,  6,  7,  8,  9,
                                              10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
    const std::vector<std::int64_t> h_axis = {0,  1,  2,  3,  4,  4,  5,  5,  6,  7,  8,  9,
                                              10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
    const std::vector<std::int64_t> w_axis = {0,  1,  2,  3,  4,  5,  4,  5,  6,  7,  8,  9,
                                              10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
    EXPECT_EQ(plan->positions[0], t_axis);
    EXPECT_EQ(plan->positions[1], h_axis);
    EXPECT_EQ(plan->positions[2], w_axis);
    // Decode row 24 (the first frame's feedback) is at 22.
    EXPECT_EQ(24 + plan->position_offset, 22);
}

TEST(TalkerPrefillPlanTest, TextOnlyWithoutPositionsCountsRows) {
    const Ids k;
    const std::vector<std::int32_t> prompt = {k.S, k.user, k.n, k.t,   k.t,
                                              k.E, k.n,    k.S, k.bot, k.n};
    auto plan = plan_talker_prefill(prompt, {}, k.ids);
    ASSERT_TRUE(plan.has_value()) << plan.error().to_string();
    EXPECT_EQ(plan->user_rows.size(), 7u);
    for (std::int64_t row = 0; row < plan->prompt_rows(); ++row) {
        EXPECT_EQ(plan->positions[0][row], row);
        EXPECT_EQ(plan->positions[2][row], row);
    }
    EXPECT_EQ(plan->position_offset, 0);
}

TEST(TalkerPrefillPlanTest, MalformedPromptsAreRefused) {
    const Ids k;
    auto refused = [&](std::vector<std::int32_t> prompt, const std::string& needle,
                       std::vector<std::vector<std::int64_t>> positions = {}) {
        auto plan = plan_talker_prefill(prompt, positions, k.ids);
        ASSERT_FALSE(plan.has_value()) << needle;
        EXPECT_EQ(plan.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(plan.error().message.find(needle), std::string::npos) << plan.error().message;
    };
    refused({}, "no <|im_start|>");
    refused({k.t, k.t}, "no <|im_start|>");
    refused({k.S, k.user, k.n, k.t}, "assistant");                   // no generation prompt
    refused({k.S, k.user, k.n, k.S, k.bot, k.n, k.t}, "assistant");  // text after it
    refused({k.S, 12345, k.n, k.t, k.S, k.bot, k.n}, "role id 12345");
    refused({k.S, k.S, k.bot, k.n}, "has no role");
    refused({k.S, k.bot, k.n}, "3 axes", {{0, 1, 2}});
    refused({k.S, k.bot, k.n}, "one entry per prompt row", {{0}, {0}, {0}});
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni

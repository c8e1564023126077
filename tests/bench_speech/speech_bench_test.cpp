// `omnirt bench speech` end to end on small inputs (no performance asserts): the code2wav-only
// mode on the tiny preset through the real qwen3_omni.code2wav stage (plugin from build/lib),
// the pipeline mode on configs/demo.yaml (whose talker streams {audio, sample_rate} chunks like
// the speech pipeline's code2wav), the report formats, and the option errors.
#include "bench/speech_bench.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/command.h"

namespace omnirt::bench {
namespace {

void expect_level_sane(const SpeechLevel& level, int concurrency, int streams) {
    EXPECT_EQ(level.concurrency, concurrency);
    EXPECT_EQ(level.streams, streams);
    EXPECT_EQ(level.failed, 0);
    EXPECT_GT(level.audio_seconds, 0);
    EXPECT_GT(level.ttfa_p50_ms, 0);
    EXPECT_GE(level.ttfa_p99_ms, level.ttfa_p50_ms);
    EXPECT_GT(level.rtf_p50, 0);
    EXPECT_GE(level.rtf_p99, level.rtf_p50);
    EXPECT_GT(level.rtf_aggregate, 0);
    EXPECT_GT(level.frames_per_second, 0);
}

TEST(SpeechBench, Code2WavOnlyTinyPreset) {
    SpeechBenchOptions options{.preset = "tiny",
                               .concurrency = {1, 2, 2},  // a repeated level too
                               .requests = 2,
                               .warmup = 1,
                               .first_chunk_frames = 4,
                               .code2wav_only = true,
                               .audio_seconds = 2.0};
    auto report = run_speech_bench(options);
    ASSERT_TRUE(report.has_value()) << report.error().to_string();
    ASSERT_EQ(report->levels.size(), 3u);
    expect_level_sane(report->levels[0], 1, 2);
    expect_level_sane(report->levels[1], 2, 2);
    expect_level_sane(report->levels[2], 2, 2);
    for (const SpeechLevel& level : report->levels) {
        EXPECT_GT(level.compute_rtf, 0);
        EXPECT_GE(level.rows_per_forward, 1.0);
        EXPECT_LE(level.rows_per_forward, 2.0);
    }
    // The same streams at both levels: the same audio.
    EXPECT_DOUBLE_EQ(report->levels[0].audio_seconds, report->levels[1].audio_seconds);
    EXPECT_NE(format_speech_table(*report).find("code2wav only"), std::string::npos);
    const auto json = nlohmann::json::parse(speech_report_json(*report));
    EXPECT_EQ(json["mode"], "code2wav_only");
    ASSERT_EQ(json["levels"].size(), 3u);
    EXPECT_EQ(json["levels"][1]["concurrency"], 2);
}

TEST(SpeechBench, PipelineModeOnTheDemoConfig) {
    SpeechBenchOptions options{.model_path = "none",
                               .config_path = testing::source_path("configs/demo.yaml"),
                               .concurrency = {1, 2},
                               .requests = 2,
                               .max_tokens = 8};
    auto report = run_speech_bench(options);
    ASSERT_TRUE(report.has_value()) << report.error().to_string();
    ASSERT_EQ(report->levels.size(), 2u);
    expect_level_sane(report->levels[0], 1, 2);
    expect_level_sane(report->levels[1], 2, 2);
    EXPECT_FALSE(report->levels[0].stage_ms.empty());
    EXPECT_NE(format_speech_table(*report).find("pipeline"), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(speech_report_json(*report))["mode"], "pipeline");
}

TEST(SpeechBench, S2ProPipelineWithAReference) {
    SpeechBenchOptions options{.pipeline = "s2_pro",
                               .reference_seconds = 0.5,
                               .preset = "tiny",
                               .concurrency = {1},
                               .requests = 2,
                               .warmup = 0,
                               .max_frames = 8};
    auto report = run_speech_bench(options);
    ASSERT_TRUE(report.has_value()) << report.error().to_string();
    ASSERT_EQ(report->levels.size(), 1u);
    expect_level_sane(report->levels[0], 1, 2);
    // 2048 samples of 44.1 kHz per frame, at most 8 frames per request.
    EXPECT_LE(report->levels[0].audio_seconds, 2 * 8 * 2048 / 44100.0 + 1e-9);
    EXPECT_GT(report->levels[0].stage_ms.at("preprocess"), 0);  // the reference's encoding
    EXPECT_NE(format_speech_table(*report).find("s2_pro"), std::string::npos);
    const auto json = nlohmann::json::parse(speech_report_json(*report));
    EXPECT_EQ(json["pipeline"], "s2_pro");
    EXPECT_EQ(json["reference_seconds"], 0.5);
}

TEST(SpeechBench, OptionErrors) {
    auto expect_error = [](SpeechBenchOptions options, ErrorCode code, const std::string& needle) {
        auto report = run_speech_bench(options);
        ASSERT_FALSE(report.has_value()) << needle;
        EXPECT_EQ(report.error().code, code) << report.error().message;
        EXPECT_NE(report.error().message.find(needle), std::string::npos) << report.error().message;
    };
    expect_error({.preset = "real"}, ErrorCode::invalid_argument, "needs --code2wav-only");
    expect_error({.pipeline = "bark"}, ErrorCode::invalid_argument, "--pipeline");
    expect_error({.pipeline = "s2_pro", .code2wav_only = true}, ErrorCode::invalid_argument,
                 "--code2wav-only");
    expect_error({.reference_seconds = 2}, ErrorCode::invalid_argument, "--reference-seconds");
    expect_error({.pipeline = "s2_pro", .reference_seconds = 61}, ErrorCode::invalid_argument,
                 "--reference-seconds");
    expect_error({.preset = "huge"}, ErrorCode::invalid_argument, "--preset");
    expect_error({.concurrency = {}}, ErrorCode::invalid_argument, "--concurrency");
    expect_error({.concurrency = {1, 0}}, ErrorCode::invalid_argument, "--concurrency");
    expect_error({.requests = 0}, ErrorCode::invalid_argument, "--requests");
    expect_error({.code2wav_only = true, .audio_seconds = 0}, ErrorCode::invalid_argument,
                 "--audio-seconds");
    expect_error({.code2wav_only = true, .max_batch_streams = 0}, ErrorCode::invalid_argument,
                 "--max-batch-streams");
    expect_error({.vocoder_only = true}, ErrorCode::invalid_argument, "--vocoder-only");
    expect_error({.pipeline = "s2_pro", .concurrency = {2}, .vocoder_only = true},
                 ErrorCode::invalid_argument, "--concurrency 1");
    // A plugin that does not exist, a config that does not exist.
    SpeechBenchOptions no_plugin{.code2wav_only = true, .plugin_path = "/nonexistent/plugin.so"};
    auto report = run_speech_bench(no_plugin);
    ASSERT_FALSE(report.has_value());
    EXPECT_NE(report.error().message.find("/nonexistent/plugin.so"), std::string::npos)
        << report.error().message;
    SpeechBenchOptions no_config{.model_path = "none", .config_path = "/nonexistent/c.yaml"};
    report = run_speech_bench(no_config);
    ASSERT_FALSE(report.has_value());
    EXPECT_NE(report.error().message.find("/nonexistent/c.yaml"), std::string::npos)
        << report.error().message;
}

// S2-Pro's vocoder alone on the tiny codec (dummy weights): every frame its own chunk, the first
// audio chunk after 5 frames, the next after 10 (the chunks double), the rest at the end; each
// chunk's cost reported.
TEST(SpeechBenchTest, S2ProVocoderOnlyReportsEveryChunk) {
    SpeechBenchOptions options{.pipeline = "s2_pro",
                               .requests = 1,
                               .warmup = 0,
                               .vocoder_only = true,
                               .audio_seconds = 1.0};
    auto report = run_speech_bench(options);
    ASSERT_TRUE(report.has_value()) << report.error().to_string();
    ASSERT_EQ(report->levels.size(), 1u);
    EXPECT_EQ(report->levels[0].failed, 0);
    ASSERT_EQ(report->chunk_costs.size(), 3u);
    EXPECT_EQ(report->chunk_costs[0].frames, 5);
    EXPECT_EQ(report->chunk_costs[1].frames, 10);
    EXPECT_EQ(report->chunk_costs[2].frames, 7);
    EXPECT_NEAR(report->chunk_costs[2].audio_end_s, 22 * 2048 / 44100.0, 1e-9);
    EXPECT_GT(report->chunk_costs[2].ms, 0);
    const auto json = nlohmann::json::parse(speech_report_json(*report));
    EXPECT_EQ(json["mode"], "vocoder_only");
    EXPECT_EQ(json["chunks"].size(), 3u);
    EXPECT_NE(format_speech_table(*report).find("chunk   1:"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::bench

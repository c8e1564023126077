#include "cli/bench_speech_command.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "bench/speech_bench.h"

namespace omnirt::cli {

void add_bench_speech_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::SpeechBenchOptions>();
    auto json_path = std::make_shared<std::string>();
    CLI::App* command = bench.add_subcommand(
        "speech",
        "Streaming speech output of Qwen3-Omni or S2-Pro: time to first audio, real-time factor, "
        "frames/s");
    command->add_option("--pipeline", options->pipeline,
                        "qwen3_omni (default: chat with audio) or s2_pro (Fish Audio S2-Pro text "
                        "to speech, configs/s2_pro_tts.yaml)");
    command->add_option("--reference-seconds", options->reference_seconds,
                        "S2-Pro: a reference clip of this many seconds per request, encoded by "
                        "the preprocessing stage (default 0: none)");
    command->add_option("--preset", options->preset,
                        "Generated checkpoint when no --model-path: tiny, small, or real (the "
                        "released sizes with dummy weights; --code2wav-only or --vocoder-only). "
                        "Default tiny");
    command->add_option("--model-path", options->model_path,
                        "A Qwen3-Omni checkpoint directory (\"none\" for configs/demo.yaml)");
    command->add_option("--config", options->config_path,
                        "Pipeline config (default configs/qwen3_omni_speech.yaml of the build)");
    command
        ->add_option("--concurrency", options->concurrency,
                     "Streams in flight, one level per value (e.g. 1,8,32; default 1)")
        ->delimiter(',');
    command->add_option("--requests", options->requests,
                        "Measured streams per level, at least the level's concurrency (default 8)");
    command->add_option("--warmup", options->warmup, "Unmeasured first streams (default 1)");
    command->add_option(
        "--first-chunk-frames", options->first_chunk_frames,
        "Overrides the code2wav stage's first_chunk_frames (default: the config's)");
    command->add_option("--max-frames", options->max_frames,
                        "Pipeline mode: the talker's frames per request at most "
                        "(stage_sampling.talker.max_tokens; default 50 = 4 s)");
    command->add_option("--max-tokens", options->max_tokens,
                        "Pipeline mode: max_tokens of each chat request (default 32)");
    command->add_flag("--code2wav-only", options->code2wav_only,
                      "Drive the qwen3_omni.code2wav stage alone with random codes");
    command->add_flag("--vocoder-only", options->vocoder_only,
                      "With --pipeline s2_pro: drive the s2_pro.vocoder stage alone (dummy "
                      "weights of the preset's codec; real = the release's sizes) and report "
                      "the cost of every audio chunk");
    command->add_option("--audio-seconds", options->audio_seconds,
                        "Code2wav / vocoder only: seconds of audio per stream (default 4)");
    command->add_option("--max-batch-streams", options->max_batch_streams,
                        "Code2wav only: the stage's max_batch_streams (default 8)");
    command->add_option("--dtype", options->dtype,
                        "Code2wav / vocoder only: float32 (default) or bfloat16");
    command->add_option("--chunk-frames", options->chunk_frames,
                        "Vocoder only: the stage's chunk_frames (default: the stage's, 25)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    command->callback([options, json_path, &exit_code] {
        spdlog::set_level(spdlog::level::warn);
        auto report = bench::run_speech_bench(*options);
        if (!report) {
            std::cerr << "omnirt bench speech: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_speech_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::speech_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
            }
        }
    });
}

}  // namespace omnirt::cli

#include "cli/bench_realtime_command.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "bench/realtime_bench.h"
#include "cli/default_config.h"
#include "vad/silero_vad.h"

namespace omnirt::cli {

void add_bench_realtime_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::RealtimeBenchOptions>();
    auto json_path = std::make_shared<std::string>();
    options->vad_model = vad::default_model_path();
    options->audio_path = std::string(OMNIRT_SOURCE_DIR) + "/tests/vad/goldens/speech_a.wav";
    CLI::App* command = bench.add_subcommand(
        "realtime",
        "Spoken conversations over /v1/realtime: answer latency after the end of speech, VAD lag, "
        "audio speed, barge-in");
    command
        ->add_option("--sessions", options->sessions,
                     "Concurrent sessions, one level per value (e.g. 1,16,64; default 1)")
        ->delimiter(',');
    command->add_option("--turns", options->turns,
                        "Measured turns per session before the barge-in turn (default 2)");
    command->add_option("--config", options->config_path,
                        "Pipeline config (default: the demo pipeline, configs/demo.yaml)");
    command->add_option("--vad-model", options->vad_model,
                        "Silero VAD v5 ONNX file (default: the cached one, docs/vad.md)");
    command->add_option("--audio", options->audio_path,
                        "Speech recording each turn plays (default tests/vad/goldens/speech_a.wav "
                        "of the source tree)");
    command->add_option("--silence-ms", options->silence_duration_ms,
                        "turn_detection.silence_duration_ms (default 500)");
    command->add_option("--max-output-tokens", options->max_output_tokens,
                        "max_output_tokens of each answer (default 32)");
    command->add_option("--max-talker-frames", options->max_talker_frames,
                        "stage_sampling.talker.max_tokens of each answer (0: not sent; default 0)");
    command->add_option("--stage-params", options->stage_params,
                        "session.stage_params as JSON (default for the demo pipeline: "
                        "{\"thinker\": {\"token_delay_ms\": 40}}, 25 tokens/s)");
    command->add_flag("--lockstep", options->lockstep,
                      "Start every session's turns at the same moment (default: spread over one "
                      "turn, as independent speakers)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    command->callback([options, json_path, &exit_code] {
        spdlog::set_level(spdlog::level::warn);
        if (options->config_path.empty()) {
            options->config_text = std::string(demo_pipeline_yaml());
            if (options->stage_params.empty()) {
                options->stage_params = R"({"thinker": {"token_delay_ms": 40}})";
            }
        }
        auto report = bench::run_realtime_bench(*options);
        if (!report) {
            std::cerr << "omnirt bench realtime: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_realtime_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::realtime_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
            }
        }
    });
}

}  // namespace omnirt::cli

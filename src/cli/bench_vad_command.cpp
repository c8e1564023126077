#include "cli/bench_vad_command.h"

#include <fstream>
#include <iostream>

#include "bench/vad_bench.h"

namespace omnirt::cli {

void add_bench_vad_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::VadBenchOptions>();
    auto json_path = std::make_shared<std::string>();
    CLI::App* command = bench.add_subcommand(
        "vad", "Voice activity detection: Silero VAD v5 windows and server_vad turn detection");
    command->add_option("--model", options->model_path,
                        "Silero VAD v5 ONNX file (default: the cache, see docs/vad.md)");
    command->add_option("--seconds", options->seconds, "Audio per measured run (default 60)");
    command->add_option("--iterations", options->iterations, "Measured runs per case (default 5)");
    command->add_option("--warmup", options->warmup, "Unmeasured first runs (default 1)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    command->callback([options, json_path, &exit_code] {
        auto report = bench::run_vad_bench(*options);
        if (!report) {
            std::cerr << "omnirt bench vad: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_vad_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::vad_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
            }
        }
    });
}

}  // namespace omnirt::cli

#include "cli/bench_media_command.h"

#include <fstream>
#include <iostream>

#include "bench/media_bench.h"

namespace omnirt::cli {

void add_bench_media_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::MediaBenchOptions>();
    auto json_path = std::make_shared<std::string>();
    CLI::App* command = bench.add_subcommand(
        "media", "Media preprocessing: 1920x1080 JPEG -> pixel_values, 30 s audio -> log-mel");
    command->add_option("--iterations", options->iterations, "Measured runs per case (default 20)");
    command->add_option("--warmup", options->warmup, "Unmeasured first runs (default 2)");
    command->add_option("--video", options->video_path,
                        "Also time this video file -> pixel_values (2 fps sampling)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    command->callback([options, json_path, &exit_code] {
        auto report = bench::run_media_bench(*options);
        if (!report) {
            std::cerr << "omnirt bench media: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_media_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::media_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
            }
        }
    });
}

}  // namespace omnirt::cli

#include "cli/bench_omni_command.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench/omni_bench.h"

namespace omnirt::cli {

void add_bench_omni_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::OmniBenchOptions>();
    auto json_path = std::make_shared<std::string>();
    auto image_size = std::make_shared<std::string>("640x480");
    CLI::App* command = bench.add_subcommand(
        "omni", "Time to first token of the Qwen3-Omni understanding pipeline, split by stage");
    command->add_option(
        "--preset", options->preset,
        "Generated checkpoint size when no --model-path (tiny, small; default tiny)");
    command->add_option("--model-path", options->model_path, "A Qwen3-Omni checkpoint directory");
    command->add_option("--config", options->config_path,
                        "Pipeline config (default configs/qwen3_omni_thinker.yaml of the build)");
    command->add_option("--images", options->images, "Images per request (default 1)");
    command->add_option("--image-size", *image_size, "Image width x height (default 640x480)");
    command->add_option("--audio-seconds", options->audio_seconds,
                        "Seconds of audio per request (default 0: none)");
    command->add_option("--video", options->video_file, "A video file sent with every request");
    command->add_option("--concurrency", options->concurrency, "Requests in flight (default 1)");
    command->add_option("--requests", options->requests, "Measured requests (default 20)");
    command->add_option("--warmup", options->warmup, "Unmeasured first requests (default 2)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    command->callback([options, json_path, image_size, &exit_code] {
        spdlog::set_level(spdlog::level::warn);
        if (std::sscanf(image_size->c_str(), "%dx%d", &options->image_width,
                        &options->image_height) != 2) {
            std::cerr << "omnirt bench omni: --image-size must be WxH, not " << *image_size << "\n";
            exit_code = 1;
            return;
        }
        auto report = bench::run_omni_bench(*options);
        if (!report) {
            std::cerr << "omnirt bench omni: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_omni_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::omni_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
            }
        }
    });
}

}  // namespace omnirt::cli

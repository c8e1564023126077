#include "cli/bench_pipeline_command.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "bench/pipeline_bench.h"

namespace omnirt::cli {

void add_bench_pipeline_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::PipelineBenchOptions>();
    auto json_path = std::make_shared<std::string>();
    CLI::App* command = bench.add_subcommand(
        "pipeline", "Per-request latency and throughput of a chain of stages without compute");
    command->add_option("--stages", options->stages, "Stages in the chain (>= 2, default 3)");
    command->add_option("--payload-bytes", options->payload_bytes,
                        "Bytes of the tensor the first stage produces (default 0)");
    command->add_option("--concurrency", options->concurrency, "Requests in flight (default 1)");
    command->add_option("--requests", options->requests, "Requests to complete (default 1000)");
    command->add_option("--warmup", options->warmup,
                        "Unmeasured first requests (default min(requests/10, 1000))");
    command->add_flag("--same-process", options->same_process,
                      "All stages in one process (same-process dispatch)");
    command->add_flag("--inline-compute", options->inline_compute,
                      "Stages compute on the delivering thread while idle (inline_compute)");
    command->add_option("--relay", options->relay_backend, "Relay backend (default shm)");
    command->add_option("--replicas", options->replicas,
                        "Processes per middle stage (replicas, default 1; needs --stages >= 3)");
    command->add_option("--stage-ms", options->stage_ms,
                        "Middle stages sleep this long per request with one worker (default 0: "
                        "identity)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    command->callback([options, json_path, &exit_code] {
        spdlog::set_level(spdlog::level::warn);
        auto report = bench::run_pipeline_bench(*options);
        if (!report) {
            std::cerr << "omnirt bench pipeline: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_pipeline_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::pipeline_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
            }
        }
    });
}

}  // namespace omnirt::cli

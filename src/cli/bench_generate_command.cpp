#include "cli/bench_generate_command.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "bench/generate_bench.h"
#include "models/builtin_families.h"

namespace omnirt::cli {

void add_bench_generate_command(CLI::App& bench, int& exit_code) {
    auto options = std::make_shared<bench::GenerateBenchOptions>();
    auto batches = std::make_shared<std::string>("1,8,32");
    auto json_path = std::make_shared<std::string>();
    CLI::App* command = bench.add_subcommand(
        "generate",
        "TTFT and decode tokens/s of a model on the AR engine, next to the memory-bandwidth "
        "roofline");
    command->add_option("--model-path", options->model_path,
                        "Checkpoint directory (its config.json picks the model family)");
    command->add_option("--preset", options->preset,
                        "A preset config of the family with dummy weights, instead of "
                        "--model-path");
    command->add_option(
        "--arch", options->arch,
        "Model family of --preset (default: the default family when it has a generation "
        "bench, else the first family that has one): " +
            models::builtin_families().describe_known());
    command->add_option(
        "--batch", *batches,
        "Batch sizes, comma-separated (default 1,8,32): that many requests at once");
    command->add_option("--input-len", options->input_len, "Prompt tokens (default 512)");
    command->add_option("--output-len", options->output_len,
                        "Generated tokens per request (default 128, EOS ignored)");
    command->add_option("--dtype", options->dtype,
                        "float32 or bfloat16 (default bfloat16); float16 on CUDA only");
    command->add_option("--load-format", options->load_format,
                        "auto (the checkpoint's weights; default with --model-path) or dummy "
                        "(seeded random weights; always with --preset)");
    command->add_option("--seed", options->seed, "Seed of the prompts and dummy weights (0)");
    command->add_option(
        "--threads", options->threads,
        "Engine threads (the stage's num_threads; default: OMP_NUM_THREADS, else the CPUs)");
    command->add_option("--max-prefill-tokens", options->max_prefill_tokens,
                        "Prompt tokens per engine step (default 2048)");
    command->add_option("--gpu", options->gpu,
                        "Run the model on cuda:N (the stage's gpu: N; needs a CUDA libtorch); "
                        "default -1, the CPU");
    command->add_option("--plugin", options->plugin,
                        "The family's plugin (default <bin>/../lib/<the family's plugin>)");
    auto bandwidth_mib = std::make_shared<std::size_t>(0);
    command->add_option("--bandwidth-mib", *bandwidth_mib,
                        "Buffer of the read-bandwidth measure in MiB (default 1024)");
    command->add_option("--json", *json_path, "Also write the report as JSON to this file");
    command->callback([options, batches, bandwidth_mib, json_path, &exit_code] {
        spdlog::set_level(spdlog::level::warn);
        auto parsed = bench::parse_batches(*batches);
        if (!parsed) {
            std::cerr << "omnirt bench generate: " << parsed.error().message << "\n";
            exit_code = 2;
            return;
        }
        options->batches = *parsed;
        options->bandwidth_bytes = *bandwidth_mib << 20;
        if (Status checked = bench::check_generate_options(*options); !checked) {
            std::cerr << "omnirt bench generate: " << checked.error().message << "\n";
            exit_code = 2;
            return;
        }
        auto report = bench::run_generate_bench(*options);
        if (!report) {
            std::cerr << "omnirt bench generate: " << report.error().to_string() << "\n";
            exit_code = 1;
            return;
        }
        std::cout << bench::format_generate_table(*report);
        if (!json_path->empty()) {
            std::ofstream out(*json_path);
            out << bench::generate_report_json(*report);
            if (!out) {
                std::cerr << "cannot write " << *json_path << "\n";
                exit_code = 1;
                return;
            }
        }
        for (const auto& row : report->batches) {
            if (row.failed > 0) exit_code = 1;
        }
    });
}

}  // namespace omnirt::cli

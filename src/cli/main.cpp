// The omnirt command line: one binary for every role (CLI tools, server, stage processes).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/bench_generate_command.h"
#include "cli/bench_media_command.h"
#include "cli/bench_omni_command.h"
#include "cli/bench_pipeline_command.h"
#include "cli/bench_realtime_command.h"
#include "cli/bench_speech_command.h"
#include "cli/bench_vad_command.h"
#include "cli/config_command.h"
#include "cli/make_checkpoint_command.h"
#include "cli/openblas_core.h"
#include "cli/process_command.h"
#include "cli/relay_commands.h"
#include "cli/run_command.h"
#include "cli/serve_command.h"
#include "cli/tokenize_command.h"
#include "cli/ucx_defaults.h"

int main(int argc, char** argv) {
    omnirt::cli::choose_openblas_kernels();  // before any plugin loads libtorch (openblas_core.h)
    omnirt::cli::choose_ucx_defaults();      // before any relay reads UCX's configuration
    // Logs go to stderr: stdout carries command output (JSON, tables).
    // (Unnamed, so a command may register a logger under any name, e.g. its process name.)
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
    CLI::App app{"omnirt: a serving runtime for omni models", "omnirt"};
    app.set_version_flag("--version", std::string("omnirt 0.1.0"));
    app.require_subcommand(1);
    int exit_code = 0;
    omnirt::cli::add_config_command(app, exit_code);
    CLI::App* bench = app.add_subcommand("bench", "Benchmarks (print a table, optionally JSON)");
    bench->require_subcommand(1);
    omnirt::cli::add_bench_relay_command(*bench, exit_code);
    omnirt::cli::add_bench_pipeline_command(*bench, exit_code);
    omnirt::cli::add_bench_generate_command(*bench, exit_code);
    omnirt::cli::add_bench_media_command(*bench, exit_code);
    omnirt::cli::add_bench_omni_command(*bench, exit_code);
    omnirt::cli::add_bench_speech_command(*bench, exit_code);
    omnirt::cli::add_bench_realtime_command(*bench, exit_code);
    omnirt::cli::add_bench_vad_command(*bench, exit_code);
    omnirt::cli::add_run_command(app, exit_code);
    omnirt::cli::add_make_checkpoint_command(app, exit_code);
    omnirt::cli::add_serve_command(app, exit_code);
    omnirt::cli::add_tokenize_command(app, exit_code);
    omnirt::cli::add_relay_peer_command(app, exit_code);
    omnirt::cli::add_stage_process_command(app, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
        int code = app.exit(error);
        // CLI11 uses 0 for --help / --version; any usage error exits 2.
        return code == 0 ? 0 : 2;
    }
    return exit_code;
}

#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt bench vad [--model FILE] [--seconds S] [--iterations N] [--warmup N] [--json FILE]`.
void add_bench_vad_command(CLI::App& bench, int& exit_code);

}  // namespace omnirt::cli

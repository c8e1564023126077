#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt bench media [--iterations N] [--warmup N] [--video FILE] [--json FILE]`.
void add_bench_media_command(CLI::App& bench, int& exit_code);

}  // namespace omnirt::cli

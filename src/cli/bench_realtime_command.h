#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt bench realtime`: spoken conversations over /v1/realtime (src/bench/realtime_bench.h).
void add_bench_realtime_command(CLI::App& bench, int& exit_code);

}  // namespace omnirt::cli

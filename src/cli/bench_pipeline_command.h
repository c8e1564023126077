#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt bench pipeline --stages N --payload-bytes B --concurrency C --requests R
//  [--same-process] [--json FILE]`.
void add_bench_pipeline_command(CLI::App& bench, int& exit_code);

}  // namespace omnirt::cli

#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt bench omni [--preset tiny|small | --model-path DIR] [--images N --image-size WxH]
//  [--audio-seconds S] [--video FILE] [--concurrency C] [--requests R] [--json FILE]`.
void add_bench_omni_command(CLI::App& bench, int& exit_code);

}  // namespace omnirt::cli

#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt bench generate --model-path DIR | --preset NAME [--batch 1,8,32] [--input-len N]
//  [--output-len N] [--dtype float32|bfloat16] [--load-format auto|dummy] [--seed N]
//  [--threads N] [--max-prefill-tokens N] [--plugin PATH] [--bandwidth-mib N] [--json FILE]`.
void add_bench_generate_command(CLI::App& bench, int& exit_code);

}  // namespace omnirt::cli

#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt bench speech [--preset tiny|small|real | --model-path DIR] [--config FILE]
//  [--concurrency 1,8,32] [--requests N] [--first-chunk-frames F] [--max-tokens N]
//  [--code2wav-only [--audio-seconds S] [--max-batch-streams B] [--dtype float32|bfloat16]]
//  [--json FILE]`.
void add_bench_speech_command(CLI::App& bench, int& exit_code);

}  // namespace omnirt::cli

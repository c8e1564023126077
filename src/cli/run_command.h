#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt run --config FILE [--input JSON] [--params JSON] [--stream] ...`: starts the pipeline,
// runs one request, prints the result (and stream chunks) as JSON, shuts everything down.
void add_run_command(CLI::App& app, int& exit_code);

}  // namespace omnirt::cli

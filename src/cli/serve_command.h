#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt serve [--config FILE] [--model-path P] [--model-name NAME] [--host H] [--port N]
// [--api-key KEY] [--max-concurrency N] [--log-level L] [--set path=value] ...`: starts the
// pipeline (the built-in demo pipeline without --config) and the OpenAI-compatible server, until
// SIGINT / SIGTERM (docs/serve.md).
void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace omnirt::cli

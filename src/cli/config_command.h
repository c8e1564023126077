#pragma once
// `omnirt config validate FILE` and `omnirt config show FILE [--format text|json|mermaid]`.
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// Adds the `config` subcommand and its two subcommands to `app`; `exit_code` receives the
// result of whichever ran.
void add_config_command(CLI::App& app, int& exit_code);

}  // namespace omnirt::cli

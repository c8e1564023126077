#pragma once
// The hidden `omnirt stage-process --plan FILE --process NAME`: the entry point of a stage
// process the runner starts (runner/child_process.h). It reads the resolved plan the parent
// wrote, hosts the stages of process NAME (pipeline::StageHost), reports "ready\n" or
// "error: <code>: <message>\n" on fd 3 when fd 3 is a pipe, and runs until every stage got a
// shutdown message or SIGTERM / SIGINT arrives. Exit codes: 0 after a clean stop, 1 on any
// failure (the message is on stderr and on the ready pipe).
#include <CLI/CLI.hpp>
#include <string>

#include "pipeline/stage_host.h"

namespace omnirt::cli {

void add_stage_process_command(CLI::App& app, int& exit_code);
[[nodiscard]] int run_stage_process(const std::string& plan_path, const std::string& process_name,
                                    const pipeline::StageHostOptions& options = {});

}  // namespace omnirt::cli

#pragma once
// Runs a program to completion and captures its output: for black-box tests of the omnirt
// binary. Output is read from both pipes concurrently (poll), so a chatty child cannot block.
#include <string>
#include <vector>

namespace omnirt::testing {

struct CommandResult {
    int exit_code = -1;  // exit status, or 128 + signal number
    std::string out;
    std::string err;
};

// argv[0] is the program path. Aborts the test binary if the child cannot be started.
CommandResult run_command(const std::vector<std::string>& argv);

// $OMNIRT_BINARY_DIR/bin/omnirt and $OMNIRT_SOURCE_DIR/<relative>.
std::string omnirt_binary();
std::string source_path(const std::string& relative);

}  // namespace omnirt::testing

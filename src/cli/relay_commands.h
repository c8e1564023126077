#pragma once
// `omnirt bench relay ...` and the hidden `omnirt relay-peer ...` (the benchmark's and the
// conformance tests' sender / receiver process).
#include <CLI/CLI.hpp>

namespace omnirt::cli {

void add_relay_peer_command(CLI::App& app, int& exit_code);
void add_bench_relay_command(CLI::App& bench, int& exit_code);
// Registers every relay backend this binary has (shm, ucx, and the c10d ones when built).
void register_relay_backends();

}  // namespace omnirt::cli

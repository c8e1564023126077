#pragma once
// Helpers for tests that run whole pipelines (runner::Pipeline) from YAML text: start with a
// placement, wait for health conditions, check that nothing is left behind.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/error.h"
#include "runner/pipeline.h"

namespace omnirt::testing {

struct Layout {
    runner::Placement placement = runner::Placement::in_process;
    bool colocated = false;  // every stage in one process group
    std::string name;
};

// The process name to write for `process` under `layout` ("one" when colocated).
std::string process_name(const Layout& layout, const std::string& process);

// Loads `yaml` (test functions and stages registered) and starts it with a fast heartbeat.
Result<std::unique_ptr<runner::Pipeline>> start_pipeline(const std::string& yaml,
                                                         const Layout& layout,
                                                         runner::PipelineOptions options = {});

// Polls `condition` (every few milliseconds) until it holds or `timeout` passes (a hang guard).
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(30000));

// True when every stage has reported (by heartbeat) no state for any request.
bool all_stages_idle(runner::Pipeline& pipeline);

// Shared-memory segments under /dev/shm created for the instance whose runtime directory is
// `runtime_dir` (its basename tags them).
int count_instance_segments(const std::string& runtime_dir);

bool process_alive(int pid);

}  // namespace omnirt::testing

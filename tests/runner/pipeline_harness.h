#pragma once
// Helpers for tests that run whole pipelines (runner::Pipeline) from YAML text: start with a
// placement, wait for health conditions, check that nothing is left behind.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/coordinator.h"
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

// Stops `pipeline` and expects none of `pids`, no shared-memory segment of its instance and not
// its runtime directory left.
void expect_nothing_left(runner::Pipeline& pipeline, const std::vector<int>& pids);

// Collects the terminal events of many requests.
class Outcomes {
  public:
    pipeline::EventCallback callback();
    // Until `count` terminal events arrived or `timeout` passed (a hang guard).
    bool wait_for(std::size_t count,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));
    std::vector<pipeline::RequestEvent> events();

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<pipeline::RequestEvent> events_;
};

}  // namespace omnirt::testing

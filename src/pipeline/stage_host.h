#pragma once
// StageHost: builds and runs the stages of one process group of a RuntimePlan: a LocalDispatcher
// for the process, one Tracer and one scheduler (from the stage's factory) per stage, and the
// Stage shells. Used by the child process entry point (runner/) and by in-process pipelines.
//
// Thread safety: create / start / stop from one thread; wait_for_shutdown and request_stop may be
// called from any thread.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "config/runtime_plan.h"
#include "core/error.h"
#include "pipeline/stage.h"

namespace omnirt::pipeline {

struct StageHostOptions {
    std::chrono::milliseconds relay_timeout{60000};
    std::chrono::milliseconds heartbeat_interval{1000};
};

class StageHost {
  public:
    // Fails when a factory is unknown or returns an error, or a stage cannot be created; the
    // message names the stage.
    [[nodiscard]] static Result<std::unique_ptr<StageHost>> create(
        std::shared_ptr<const config::RuntimePlan> plan, const std::string& process_name,
        StageHostOptions options = {});
    StageHost(const StageHost&) = delete;
    StageHost& operator=(const StageHost&) = delete;
    ~StageHost();  // stop()

    [[nodiscard]] Status start();
    // Blocks until every stage received a shutdown message or request_stop() was called.
    void wait_for_shutdown();
    void request_stop();
    // Stops every stage (idempotent).
    void stop();

    [[nodiscard]] std::vector<Stage*> stages() const;

  private:
    struct State;
    explicit StageHost(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::pipeline

#include "pipeline_harness.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "config/load.h"
#include "relay/shm/segment.h"
#include "runner/builtins.h"
#include "support/command.h"

namespace omnirt::testing {

std::string process_name(const Layout& layout, const std::string& process) {
    return layout.colocated ? "one" : process;
}

Result<std::unique_ptr<runner::Pipeline>> start_pipeline(const std::string& yaml,
                                                         const Layout& layout,
                                                         runner::PipelineOptions options) {
    // The pipelines of these tests are made of test stages, here and in the stage processes.
    OMNI_RETURN_IF_ERROR(runner::enable_test_stages());
    OMNI_RETURN_IF_ERROR(runner::register_builtins());
    OMNI_TRY(config::PipelineConfig config, config::load_pipeline_text(yaml, "<test pipeline>"));
    options.placement = layout.placement;
    if (options.binary.empty()) options.binary = omnirt_binary();
    options.heartbeat_interval = std::chrono::milliseconds(20);
    return runner::Pipeline::start(config, options);
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

bool all_stages_idle(runner::Pipeline& pipeline) {
    auto health = pipeline.health();
    for (const auto& stage : health.stages) {
        if (stage.active_requests != 0 || stage.queue_depth != 0) return false;
    }
    return true;
}

int count_instance_segments(const std::string& runtime_dir) {
    std::string tag = "omnirt." + relay::shm::instance_tag(runtime_dir) + ".";
    int count = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
        if (entry.path().filename().string().rfind(tag, 0) == 0) ++count;
    }
    return count;
}

bool process_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

void expect_nothing_left(runner::Pipeline& pipeline, const std::vector<int>& pids) {
    std::string runtime_dir = pipeline.plan().runtime_dir;
    pipeline.stop();
    for (int pid : pids) EXPECT_FALSE(process_alive(pid)) << "pid " << pid;
    EXPECT_EQ(count_instance_segments(runtime_dir), 0);
    EXPECT_FALSE(std::filesystem::exists(runtime_dir));
}

pipeline::EventCallback Outcomes::callback() {
    return [this](pipeline::RequestEvent event) {
        if (!event.terminal()) return;
        std::lock_guard lock(mutex_);
        events_.push_back(std::move(event));
        changed_.notify_all();
    };
}

bool Outcomes::wait_for(std::size_t count, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return events_.size() >= count; });
}

std::vector<pipeline::RequestEvent> Outcomes::events() {
    std::lock_guard lock(mutex_);
    return events_;
}

}  // namespace omnirt::testing

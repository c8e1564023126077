#pragma once
// Test helpers for the Stage tests: FakeCoordinator (a raw control plane bound to the plan's
// coordinator PULL and abort PUB), FakeScheduler (a Scheduler with one thread applying a
// handler), plans built from YAML in a private runtime directory, and leak checks (threads,
// /dev/shm segments of this process).
#include <gtest/gtest.h>

#include "support/threads.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/runtime_dir.h"
#include "config/runtime_plan.h"
#include "control/control_plane.h"
#include "pipeline/local_dispatch.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage.h"
#include "pipeline/trace.h"
#include "proto/messages.h"

namespace omnirt::pipeline::testing {

using namespace std::chrono_literals;
// Only a guard against hangs: every wait ends as soon as its condition holds.
inline constexpr std::chrono::milliseconds kHangGuard = 30s;

// Registers the dummy factory "h2test.stage" and the functions the stage tests name:
//   merge       h2test.merge            data = {source: source data}, request of any input
//   route       h2test.route            request.params["route"] (list of names)
//   wait_for    h2test.wait_for         payload data["wait_for"] (list) or nullopt when absent
//   projection  h2test.project          data = {"projected_for": target, "data": old data}
//   stream_done h2test.stream_done      request.params["stream_done_to"] (list)
// Idempotent.
void register_test_functions();

// A plan from pipeline YAML (load without plugins, validate, prepare) in a fresh private
// runtime directory. Fails the test (and returns null) when the YAML is invalid.
struct TestPlan {
    std::unique_ptr<config::RuntimeDirectory> dir;
    std::shared_ptr<const config::RuntimePlan> plan;
};
TestPlan make_plan(const std::string& yaml);

// Entries of /dev/shm that segments of this process would have ("omnirt.*.<pid>.*").
std::vector<std::string> shm_segments_of_this_process();
// Threads of this process (/proc/self/task).
std::size_t thread_count();
// Their names, for failure messages.
using omnirt::testing::thread_count_settles_to;
std::string thread_names();

// A Scheduler with one worker thread that calls `handler` for every inbox message. It records
// every message and abort, and counts a request active from its first message until it emits
// a result or error for it or aborts it. Thread-safe.
class FakeScheduler final : public Scheduler {
  public:
    using Handler = std::function<void(const IncomingMessage&, FakeScheduler&)>;
    // new_request -> result with the same payload; stream messages are only recorded.
    static Handler identity();
    // Records only; the test emits.
    static Handler hold();

    // `retain_payloads` false: recorded messages drop their payload and chunk once handled, so
    // zero-copy relay views go back to the sender (a receiver that keeps views pins the
    // sender's slots and its puts never complete).
    explicit FakeScheduler(Handler handler = identity(), bool retain_payloads = true);
    ~FakeScheduler() override;

    Status start() override;
    void stop() override;
    void abort(const std::string& request_id) override;
    std::size_t active_requests() const override;

    void emit(OutgoingMessage message);
    void emit_result(const std::string& request_id, StagePayload payload);
    void emit_error(const std::string& request_id, Error error);
    void emit_stream(const std::string& request_id, Value chunk, std::optional<std::string> target,
                     Value metadata = {});

    std::vector<IncomingMessage> received() const;
    std::vector<IncomingMessage> received_for(const std::string& request_id) const;
    bool wait_received(std::size_t count);
    bool wait_received_for(const std::string& request_id, std::size_t count);
    bool wait_aborted(const std::string& request_id);
    bool was_aborted(const std::string& request_id) const;

  private:
    Handler handler_;
    bool retain_payloads_;
    std::thread thread_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<IncomingMessage> received_;
    std::set<std::string> aborted_;
    std::set<std::string> active_;
    bool stopped_ = false;
};

// The coordinator's sockets of a plan. Thread-safe.
class FakeCoordinator {
  public:
    static std::unique_ptr<FakeCoordinator> create(const config::RuntimePlan& plan);
    ~FakeCoordinator();

    Status submit(const std::string& stage, const std::string& request_id, Value data,
                  Value params = {});
    Status send_to_stage(const std::string& stage, const proto::ControlMessage& message);
    Status send_bytes_to_stage(const std::string& stage, std::vector<std::uint8_t> bytes);
    Status abort(const std::string& request_id);
    // Waits until `count` stages subscribed to the abort broadcast.
    bool wait_for_subscribers(std::size_t count);

    std::optional<proto::CompleteMessage> wait_complete(const std::string& request_id,
                                                        const std::string& from_stage = "");
    std::vector<proto::StreamMessage> wait_streams(const std::string& request_id,
                                                   std::size_t count);
    bool wait_heartbeat(const std::string& stage);
    std::vector<proto::CompleteMessage> completes() const;
    std::size_t completes_for(const std::string& request_id) const;

    void stop();

  private:
    explicit FakeCoordinator(const config::RuntimePlan& plan);
    config::RuntimePlan plan_;
    std::unique_ptr<control::ControlPlane> plane_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<proto::ControlMessage> messages_;
};

// A stage with a FakeScheduler; `scheduler` stays valid while `stage` lives.
struct StageUnderTest {
    FakeScheduler* scheduler = nullptr;
    std::shared_ptr<Tracer> tracer;
    std::unique_ptr<Stage> stage;
};
struct StageSetup {
    FakeScheduler::Handler handler = FakeScheduler::identity();
    LocalDispatcher* local = nullptr;
    bool retain_payloads = true;
    std::chrono::milliseconds relay_timeout{30000};
    std::chrono::milliseconds heartbeat_interval{1000};
    std::function<void()> on_shutdown;
};
// Creates and starts the stage; fails the test on errors.
StageUnderTest start_stage(const TestPlan& plan, const std::string& name, StageSetup setup = {});

// A payload with one u8 tensor of `bytes` bytes (pattern i % 251) under data["tensor"].
StagePayload tensor_payload(const std::string& request_id, std::size_t bytes);
bool has_pattern(const Tensor& tensor, std::size_t bytes);

}  // namespace omnirt::pipeline::testing

#pragma once
// Test helpers for the coordinator tests: FakeStage (a raw control plane standing in for a stage
// process), EventLog (collects a request's events and waits without sleeping) and
// CoordinatorTest (a private runtime directory, ipc endpoints, leak checks).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/runtime_dir.h"
#include "control/control_plane.h"
#include "pipeline/coordinator.h"
#include "support/threads.h"

namespace omnirt::pipeline::testing {

using namespace std::chrono_literals;
// Only a guard against hangs: every wait ends as soon as its condition holds.
inline constexpr Duration kHangGuard = 30s;

// Binds a stage's PULL endpoint and subscribes to the abort broadcast; records what arrives and
// sends Complete / Stream / Heartbeat messages to the coordinator. Thread-safe.
class FakeStage {
  public:
    // Runs on the fake's IO thread for every message on its PULL (after it is recorded); may
    // send (sends from the IO thread never block).
    using Responder = std::function<void(FakeStage& stage, const proto::ControlMessage& message)>;

    static std::unique_ptr<FakeStage> create(std::string name, const std::string& stage_endpoint,
                                             const std::string& abort_endpoint,
                                             std::string coordinator_endpoint,
                                             Responder responder = {});
    ~FakeStage();

    const std::string& name() const { return name_; }

    // Waits until at least `count` messages arrived on the PULL / the abort SUB.
    bool wait_for_messages(std::size_t count, Duration timeout = kHangGuard);
    bool wait_for_aborts(std::size_t count, Duration timeout = kHangGuard);
    std::vector<proto::ControlMessage> messages() const;
    std::vector<proto::SubmitMessage> submits() const;
    std::vector<proto::AbortMessage> aborts() const;
    // Pause / resume broadcasts (they travel on the abort broadcast).
    bool wait_for_pauses(std::size_t count, Duration timeout = kHangGuard);
    std::vector<proto::PauseMessage> pauses() const;

    // To the coordinator.
    Status send(const proto::ControlMessage& message);
    Status send_bytes(std::vector<std::uint8_t> bytes);
    Status complete(const std::string& request_id, StagePayload result);
    Status complete_with_error(const std::string& request_id, Error error);
    Status chunk(const std::string& request_id, std::int64_t index, Value chunk,
                 Value metadata = {});
    Status heartbeat(std::int64_t queue_depth = 0, std::int64_t active = 0,
                     std::int64_t processed = 0);

    void stop();

  private:
    FakeStage(std::string name, std::string coordinator_endpoint, Responder responder);
    void record(proto::ControlMessage message);
    void record_abort(proto::ControlMessage message);

    std::string name_;
    std::string coordinator_endpoint_;
    Responder responder_;
    std::unique_ptr<control::ControlPlane> plane_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<proto::ControlMessage> messages_;
    std::vector<proto::AbortMessage> aborts_;
    std::vector<proto::PauseMessage> pauses_;
};

// A responder that answers every submit with a completion whose data is the submitted data.
FakeStage::Responder echo_responder();

// Collects coordinator events; callback() may be used for many requests.
class EventLog {
  public:
    EventCallback callback();
    // Waits until `count` terminal events arrived in total.
    bool wait_for_terminals(std::size_t count, Duration timeout = kHangGuard);
    bool wait_for_events(std::size_t count, Duration timeout = kHangGuard);
    std::vector<RequestEvent> events() const;
    std::vector<RequestEvent> events_for(const std::string& request_id) const;
    std::size_t terminal_count() const;

  private:
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<RequestEvent> events_;
    std::size_t terminals_ = 0;
};

// Threads of this process (from /proc/self/task).
std::size_t thread_count();
using omnirt::testing::thread_count_settles_to;  // support/threads.h
// Entries of a directory (ipc socket files left behind).
std::size_t directory_entries(const std::string& path);

class CoordinatorTest : public ::testing::Test {
  protected:
    void SetUp() override;
    void TearDown() override;

    std::string ipc(const std::string& name) const;
    // Options for stages `stages` (each with an ipc endpoint); the first is the entry stage and
    // `terminals` the static terminal stages.
    CoordinatorOptions options(const std::vector<std::string>& stages,
                               const std::vector<std::string>& terminals) const;
    // Creates and starts the coordinator.
    Coordinator& start(CoordinatorOptions options);
    // A fake for `stage` of the current options; call after start().
    FakeStage& add_stage(const std::string& stage, FakeStage::Responder responder = {});
    // Fakes added so far joined the abort broadcast.
    void wait_for_stages();

    std::unique_ptr<config::RuntimeDirectory> dir_;
    CoordinatorOptions options_;
    std::unique_ptr<Coordinator> coordinator_;
    std::map<std::string, std::unique_ptr<FakeStage>> stages_;
    std::size_t threads_before_ = 0;
};

OmniRequest make_request(Value inputs);

}  // namespace omnirt::pipeline::testing

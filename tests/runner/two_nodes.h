#pragma once
// Two nodes of a pipeline in one test process (docs/multi_node.md): the head (NodeHub +
// Pipeline::start with node addresses) on 127.0.0.1 and node 1 (run_node_agent on a thread of
// its own) on 127.0.0.2, one network namespace. Node 1 may leave and join again.
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/load.h"
#include "runner/node_agent.h"
#include "runner/node_hub.h"
#include "support/command.h"
#include "support/ports.h"

namespace omnirt::testing {

// A base port with six endpoints of the head (base..base+5) and node 1's two free.
inline int free_base_port() { return free_ports(6, {"127.0.0.1", "127.0.0.2"}); }

// On every way out (a failed ASSERT too) node 1 leaves and the hub stops.
class TwoNodes {
  public:
    explicit TwoNodes(std::vector<std::string> node_names = {})
        : node_names_(std::move(node_names)) {}
    ~TwoNodes() { release(); }

    // Creates the hub, starts node 1 and waits for it to join.
    Status join() {
        using std::chrono::milliseconds;
        OMNI_TRY(hub_, runner::NodeHub::create({.bind_endpoint = "tcp://127.0.0.1:0",
                                                .nnodes = 2,
                                                .head_address = "127.0.0.1",
                                                .heartbeat_interval = milliseconds(50),
                                                .node_timeout = milliseconds(6000),
                                                .node_names = node_names_}));
        start_node();
        OMNI_TRY(addresses_, hub_->wait_for_nodes(milliseconds(30000)));
        return ok_status();
    }

    // Starts the pipeline of `yaml` with node 0's process groups here; the hub stops and
    // starts the head's processes through it.
    Result<std::unique_ptr<runner::Pipeline>> start(const std::string& yaml) {
        using std::chrono::milliseconds;
        OMNI_TRY(auto config, config::load_pipeline_text(yaml, "<two nodes>"));
        runner::NodeHub* hub = hub_.get();
        OMNI_TRY(auto pipeline,
                 runner::Pipeline::start(
                     config, {.binary = omnirt_binary(),
                              .heartbeat_interval = milliseconds(20),
                              .node_addresses = addresses_,
                              .on_coordinator_started =
                                  [hub](auto plan, pipeline::Coordinator& c) {
                                      return hub->serve_plan(std::move(plan), c);
                                  },
                              .before_stop = [hub] { hub->stop(milliseconds(10000)); }}));
        runner::Pipeline* raw = pipeline.get();
        hub_->set_local_control(
            [raw](const std::vector<std::string>& processes, bool start,
                  const std::string& reason) { raw->control_processes(processes, start, reason); });
        return pipeline;
    }

    // Node 1 leaves (as its `omnirt serve` does on SIGTERM): its stages stop; its agent's status.
    Status stop_node() {
        stop_node_ = true;
        if (node_.joinable()) node_.join();
        return node_status_;
    }

    // Node 1 as a new process would be (after stop_node): joins the head again.
    void start_node() {
        using std::chrono::milliseconds;
        stop_node_ = false;
        agent_status_ = std::make_shared<runner::NodeAgentStatus>();
        node_ = std::thread([this, status = agent_status_] {
            node_status_ = runner::run_node_agent(
                {.head_endpoint = hub_->endpoint(),
                 .nnodes = 2,
                 .node_rank = 1,
                 .address = "127.0.0.2",
                 .join_timeout = milliseconds(30000),
                 .heartbeat_interval = milliseconds(50),
                 .pipeline = {.binary = omnirt_binary(), .heartbeat_interval = milliseconds(20)},
                 .status = status},
                stop_node_);
        });
    }

    // What node 1's agent last reported (its processes, its name).
    runner::NodeAgentStatus::Snapshot node_status() const {
        return agent_status_ ? agent_status_->get() : runner::NodeAgentStatus::Snapshot{};
    }
    std::map<std::string, std::int64_t> node_processes() const { return node_status().processes; }

    runner::NodeHub& hub() { return *hub_; }

  private:
    void release() {
        stop_node_ = true;
        if (node_.joinable()) node_.join();
        if (hub_) hub_->stop(std::chrono::milliseconds(0));
    }

    std::vector<std::string> node_names_;
    std::unique_ptr<runner::NodeHub> hub_;
    std::vector<std::string> addresses_;
    std::atomic<bool> stop_node_{false};
    Status node_status_;
    std::shared_ptr<runner::NodeAgentStatus> agent_status_;
    std::thread node_;
};

}  // namespace omnirt::testing

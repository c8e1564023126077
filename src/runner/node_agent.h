#pragma once
// The side of a pipeline on several nodes that runs on node ranks other than 0
// (docs/multi_node.md): `omnirt serve --nnodes N --node-rank R --dist-init-addr HEAD:PORT
// --node-addr ADDRESS`. It joins the head (runner/node_hub.h), receives the runtime plan,
// starts the process groups placed on its rank (Pipeline::start_node) and supervises them,
// reporting stage losses and restarts to the head, and sends a heartbeat (its processes' pids)
// every heartbeat_interval.
//
// The head's process_control stops some of the node's processes and keeps them down, or starts
// them afresh (the ranks of a tensor-parallel stage over several nodes, Pipeline::
// control_processes).
//
// The head's answers: a `reject` ends the agent with its reason (a wrong rank, node count or
// address, another omnirt version); `shutdown` (the head stops) or `rejoin` (the head
// restarted) stop the node's stages and join again, waiting up to join_timeout for a head.
// A head that falls silent leaves the stages running: when the link comes back the head sees
// them again.
//
// Threads: run_node_agent blocks on the caller's thread, which owns the socket and must outlive
// the children (they get PR_SET_PDEATHSIG); supervision threads only queue their reports.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.h"
#include "runner/pipeline.h"

namespace omnirt::runner {

// What the agent is doing, for the node's /health (cli/serve_nodes.cpp). Thread-safe.
class NodeAgentStatus {
  public:
    struct Snapshot {
        bool running = false;                           // welcomed, its process groups started
        std::string detail;                             // what it waits for, or why it stopped
        std::map<std::string, std::int64_t> processes;  // process -> pid
        std::string node_name;  // the config's `nodes:` name of this node, once welcomed
    };
    void set(Snapshot snapshot) {
        std::lock_guard lock(mutex_);
        snapshot_ = std::move(snapshot);
    }
    [[nodiscard]] Snapshot get() const {
        std::lock_guard lock(mutex_);
        return snapshot_;
    }

  private:
    mutable std::mutex mutex_;
    Snapshot snapshot_;
};

struct NodeAgentOptions {
    std::string head_endpoint;  // "tcp://HOST:PORT" (a DNS name or an address)
    int nnodes = 2;
    int node_rank = 1;
    std::string address;  // this node's address: its stage endpoints bind there
    // How long to wait for the head's welcome (a head that starts later is fine).
    std::chrono::milliseconds join_timeout{300000};
    std::chrono::milliseconds heartbeat_interval{500};
    PipelineOptions pipeline;  // placement, binary, timeouts of the node's process groups
    std::shared_ptr<NodeAgentStatus> status;  // optional: kept up to date
};

// Runs until `stop` becomes true (ok: the node left), or fails: invalid_argument for bad
// options, failed_precondition with the head's reason when it refused the node,
// deadline_exceeded when no head answered within join_timeout, or the error that kept the
// node's stages from starting (sent to the head too).
[[nodiscard]] Status run_node_agent(const NodeAgentOptions& options, const std::atomic<bool>& stop);

}  // namespace omnirt::runner

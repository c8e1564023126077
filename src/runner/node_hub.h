#pragma once
// NodeHub: the head's side of a pipeline on several nodes (docs/multi_node.md). Node rank 0
// runs the coordinator, the HTTP API and its own process groups; the other ranks run
// `omnirt serve --node-rank R` (runner/node_agent.h), which joins here.
//
//   hub = NodeHub::create(options)            // binds the join socket (--dist-init-addr's port)
//   addresses = hub->wait_for_nodes(timeout)   // every rank joined; their addresses by rank
//   Pipeline::start(config, {.node_addresses = addresses,
//                            .on_coordinator_started = hub->serve_plan})
//   ... serving ...
//   hub->stop(grace)                           // the nodes stop their stages
//   pipeline->stop()
//
// Supervision of nodes: a node that sends nothing for node_timeout once it runs its stages (its
// link is cut, its omnirt hangs; while it starts them only the pipeline's start-up bounds it),
// leaves, or joins again as a new process (it restarted) is missing: its stages are
// marked restarting with a reason naming the node ("node 1 (10.77.0.2) is missing: ...", or
// "node gpu-a (rank 1, 10.77.0.2) ..." for a node named in `nodes:`), so
// requests through them fail at once and /health says which node it is. Once it is heard again
// (its link came back, or it joined again and started its stages), its stages serve again.
// Stage processes that die on a node are reported by that node (its own supervision restarts
// them) and reach the coordinator the same way as on the head.
//
// A tensor-parallel stage whose ranks run on several nodes (`node: [...]`) goes down as a whole
// when any of its nodes goes missing: its stage is marked restarting naming that node, and the
// hub stops its ranks on the other nodes (the head's through set_local_control, the others'
// with a process_control message) and keeps them down: a rank is never restarted alone, its
// group's collectives and rendezvous would not match. Once every node of the stage is back
// (a node that joined again starts its own ranks with its plan), the hub starts the ranks on
// the other nodes afresh; rank 0's first heartbeat makes the stage serve again.
//
// Threads: one IO thread owns the socket (messages, heartbeats, timeouts) and calls the
// coordinator. Public methods may be called from any thread. Joins are checked (protocol
// version, node count, rank, address); a malformed or refused one gets a `reject` with the
// reason and changes nothing.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/runtime_plan.h"
#include "config/schema.h"
#include "core/error.h"
#include "pipeline/coordinator.h"

namespace omnirt::runner {

struct NodeHubOptions {
    // Where nodes join: "tcp://*:PORT" (every interface) or "tcp://ADDRESS:PORT".
    std::string bind_endpoint;
    int nnodes = 2;
    std::string head_address;  // node 0's address (its stage endpoints bind there)
    std::chrono::milliseconds heartbeat_interval{500};
    // A node silent this long is missing.
    std::chrono::milliseconds node_timeout{3000};
    config::RestartPolicy restart;  // handed to the nodes for their process groups
    // The config's `nodes:` names (index = rank; at most nnodes): messages name nodes by them.
    std::vector<std::string> node_names;
};

// Stops processes of the head (start false: keeps them down) or starts them afresh (start
// true); Pipeline::control_processes. Called on the hub's IO thread: must not block.
using LocalProcessControl = std::function<void(const std::vector<std::string>& processes,
                                               bool start, const std::string& reason)>;

struct NodeStatus {
    int rank = 0;
    std::string address;   // empty until it joined
    bool joined = false;   // it joined and has not left
    bool missing = false;  // joined once, now silent, gone or restarted (reason says which)
    std::string reason;
};

class NodeHub {
  public:
    // invalid_argument for nnodes < 2 or an empty head address; unavailable when the endpoint
    // cannot be bound.
    [[nodiscard]] static Result<std::unique_ptr<NodeHub>> create(NodeHubOptions options);
    NodeHub(const NodeHub&) = delete;
    NodeHub& operator=(const NodeHub&) = delete;
    ~NodeHub();  // stop(0)

    // The bound endpoint ("tcp://0.0.0.0:PORT"; the port the OS chose for port 0).
    [[nodiscard]] std::string endpoint() const;

    // Blocks until ranks 1..nnodes-1 have joined (a node may join any time before the
    // deadline). The addresses of every node, index = rank. deadline_exceeded naming the ranks
    // that did not join; unavailable after stop().
    [[nodiscard]] Result<std::vector<std::string>> wait_for_nodes(
        std::chrono::milliseconds timeout);

    // Sends `plan` (placed on the addresses wait_for_nodes returned) to every node, and to a
    // node that joins again later; from here on node supervision reports to `coordinator`, which
    // must outlive stop(). Fails when called twice or after stop().
    [[nodiscard]] Status serve_plan(std::shared_ptr<const config::RuntimePlan> plan,
                                    pipeline::Coordinator& coordinator);

    // Where the hub stops and starts the head's own processes (the ranks of a TP stage over
    // several nodes, see above); what it asked for before this call is handed over at once.
    void set_local_control(LocalProcessControl control);

    [[nodiscard]] std::vector<NodeStatus> nodes() const;

    // Tells every node to stop its stages, waits up to `grace` for them to confirm, and closes
    // the socket. Idempotent.
    void stop(std::chrono::milliseconds grace);

  private:
    struct State;
    explicit NodeHub(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::runner

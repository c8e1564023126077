#pragma once
// The messages between the head (node rank 0, runner/node_hub.h) and the other nodes
// (runner/node_agent.h) of a pipeline on several nodes (docs/multi_node.md). One message is one
// ZMQ frame: a msgpack map with a "type" and the fields below. Everything a peer sends is
// untrusted: decode_node_message checks every field and fails with invalid_argument naming it.
//
//   agent -> hub: join, heartbeat (the node's running processes), stages_down, stages_restarted,
//                 leave
//   hub -> agent: welcome (the session and the runtime plan), reject (why; permanent),
//                 hub_heartbeat, rejoin (unknown session: join again), shutdown,
//                 process_control (stop some of the node's processes and keep them down, or
//                 start them afresh: the ranks of a tensor-parallel stage over several nodes)
//
// Thread safety: pure functions.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "config/schema.h"
#include "core/error.h"

namespace omnirt::runner::node {

inline constexpr std::int64_t kProtocolVersion = 2;
// The largest message accepted (a welcome carries the plan, a few KiB per stage).
inline constexpr std::size_t kMaxMessageBytes = std::size_t{16} << 20;

struct Join {
    std::int64_t version = kProtocolVersion;
    int nnodes = 0;
    int node_rank = 0;
    std::string address;  // where this node's stage endpoints bind
    std::int64_t pid = 0;
};

struct Welcome {
    std::uint64_t session = 0;       // the head's instance; later messages carry it
    std::vector<std::uint8_t> plan;  // runner::encode_plan
    config::RestartPolicy restart;   // supervision of the node's process groups
};

struct Reject {
    std::string reason;
};

struct Heartbeat {
    std::uint64_t session = 0;
    int node_rank = 0;
    std::map<std::string, std::int64_t> pids;  // process -> pid of the incarnation running now
};

struct HubHeartbeat {
    std::uint64_t session = 0;
};

struct StagesDown {
    std::uint64_t session = 0;
    int node_rank = 0;
    std::vector<std::string> stages;
    std::string reason;
    bool restarting = false;  // else failed for good
};

struct StagesRestarted {
    std::uint64_t session = 0;
    int node_rank = 0;
    std::vector<std::string> stages;
    std::int64_t pid = 0;
};

struct Leave {
    std::uint64_t session = 0;
    int node_rank = 0;
    std::string reason;
};

struct Rejoin {
    std::string reason;
};

struct Shutdown {
    std::string reason;
};

// The head asks a node to stop `processes` (its own, by plan name) and keep them down
// (start false), or to start them afresh, stopping what runs (start true).
struct ProcessControl {
    std::uint64_t session = 0;
    std::vector<std::string> processes;
    bool start = false;
    std::string reason;
};

using NodeMessage = std::variant<Join, Welcome, Reject, Heartbeat, HubHeartbeat, StagesDown,
                                 StagesRestarted, Leave, Rejoin, Shutdown, ProcessControl>;

[[nodiscard]] Result<std::vector<std::uint8_t>> encode_node_message(const NodeMessage& message);
// invalid_argument: "node message: <field>: <what is wrong>".
[[nodiscard]] Result<NodeMessage> decode_node_message(std::span<const std::uint8_t> bytes);
[[nodiscard]] std::string_view message_type(const NodeMessage& message);

}  // namespace omnirt::runner::node

#pragma once
// `omnirt serve` on several nodes (docs/multi_node.md): the flags, the head's wait for the
// other ranks, and the whole of a rank other than 0 (which serves no HTTP: it runs its process
// groups for the head).
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "config/schema.h"
#include "core/error.h"
#include "runner/node_hub.h"

namespace omnirt::cli {

struct NodeFlags {
    int nnodes = 1;
    int node_rank = 0;
    std::string dist_init_addr;  // HOST:PORT of the head's join socket
    std::string node_addr;       // this node's address
    double join_timeout_s = 300;
    double node_timeout_s = 3;

    [[nodiscard]] bool several() const { return nnodes > 1; }
};

void add_node_flags(CLI::App& command, NodeFlags& flags);

// Checks the flags together: invalid_argument naming the flag.
[[nodiscard]] Status check_node_flags(const NodeFlags& flags);

// "HOST:PORT" or "[IPv6]:PORT" -> {host, port}; invalid_argument otherwise.
struct HostPort {
    std::string host;
    int port = 0;
};
[[nodiscard]] Result<HostPort> parse_host_port(const std::string& text);

// Rank 0: binds the join socket on --dist-init-addr's port and waits for the other ranks
// (bounded by --node-join-timeout). The hub and every node's address, index = rank.
struct StartedHub {
    std::unique_ptr<runner::NodeHub> hub;
    std::vector<std::string> node_addresses;
};
// `node_names`: the config's `nodes:` (messages name nodes by them; more names than --nnodes
// is an error).
[[nodiscard]] Result<StartedHub> start_head(const NodeFlags& flags,
                                            const config::RestartPolicy& restart,
                                            const std::vector<std::string>& node_names = {});

// A rank other than 0: joins the head and runs this node's process groups until SIGINT /
// SIGTERM (which the caller has blocked in every thread), answering /health (200 once its
// stages run, else 503 with what it waits for) and /health/live on host:port. The exit code.
[[nodiscard]] int run_node(const NodeFlags& flags, const std::string& host, int port);

}  // namespace omnirt::cli

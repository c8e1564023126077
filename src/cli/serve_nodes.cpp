#include "cli/serve_nodes.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cctype>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "runner/node_agent.h"
#include "serve/http/http_server.h"

namespace omnirt::cli {
namespace {

std::chrono::milliseconds seconds(double value) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(value * 1000));
}

// A ZMQ tcp endpoint; an IPv6 literal in brackets.
std::string tcp_endpoint(const std::string& host, int port) {
    const bool ipv6 = host.find(':') != std::string::npos;
    return "tcp://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

void add_node_flags(CLI::App& command, NodeFlags& flags) {
    command
        .add_option("--nnodes", flags.nnodes,
                    "Nodes the pipeline spans (default 1); stages pick theirs with `node:` "
                    "(docs/multi_node.md)")
        ->check(CLI::Range(1, 1024));
    command
        .add_option("--node-rank", flags.node_rank,
                    "This node, 0..nnodes-1; rank 0 runs the coordinator and the HTTP API, the "
                    "others only their stages (default 0)")
        ->check(CLI::Range(0, 1023));
    command.add_option("--dist-init-addr", flags.dist_init_addr,
                       "HOST:PORT where the ranks find rank 0 (rank 0 listens on the port)");
    command.add_option("--node-addr", flags.node_addr,
                       "This node's IP address: its stages' control endpoints bind there and the "
                       "other nodes reach them there (required with --nnodes > 1)");
    command
        .add_option("--node-join-timeout", flags.join_timeout_s,
                    "Seconds rank 0 waits for the other ranks to join, and they for rank 0 "
                    "(default 300)")
        ->check(CLI::PositiveNumber);
    command
        .add_option("--node-timeout", flags.node_timeout_s,
                    "Seconds of silence after which rank 0 reports a node missing and fails "
                    "requests through its stages (default 3)")
        ->check(CLI::Range(1.0, 3600.0));
}

Result<HostPort> parse_host_port(const std::string& text) {
    auto bad = [&](const std::string& why) {
        return fail(ErrorCode::invalid_argument,
                    "--dist-init-addr '" + text + "': " + why + " (expected HOST:PORT)");
    };
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) return bad("no port");
    HostPort out;
    out.host = text.substr(0, colon);
    if (out.host.front() == '[') {
        if (out.host.size() < 3 || out.host.back() != ']') return bad("unbalanced brackets");
        out.host = out.host.substr(1, out.host.size() - 2);
    } else if (out.host.find(':') != std::string::npos) {
        return bad("an IPv6 address goes in brackets");
    }
    const std::string port = text.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos) {
        return bad("the port is not a number");
    }
    out.port = std::stoi(port);
    if (out.port < 1 || out.port > 65535) return bad("the port is outside 1..65535");
    for (char c : out.host) {
        const bool allowed = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                             c == ':' || c == '_';
        if (!allowed) return bad("the host has a character outside [A-Za-z0-9.-_:]");
    }
    return out;
}

Status check_node_flags(const NodeFlags& flags) {
    if (!flags.several()) {
        if (flags.node_rank != 0 || !flags.dist_init_addr.empty()) {
            return fail(ErrorCode::invalid_argument,
                        "--node-rank and --dist-init-addr need --nnodes 2 or more");
        }
        return ok_status();
    }
    if (flags.node_rank >= flags.nnodes) {
        return fail(ErrorCode::invalid_argument, "--node-rank " + std::to_string(flags.node_rank) +
                                                     " is not below --nnodes " +
                                                     std::to_string(flags.nnodes));
    }
    if (flags.dist_init_addr.empty()) {
        return fail(ErrorCode::invalid_argument,
                    "--nnodes " + std::to_string(flags.nnodes) +
                        " needs --dist-init-addr HOST:PORT (where the ranks find rank 0)");
    }
    OMNI_RETURN_IF_ERROR(parse_host_port(flags.dist_init_addr));
    if (flags.node_addr.empty()) {
        return fail(ErrorCode::invalid_argument,
                    "--nnodes " + std::to_string(flags.nnodes) +
                        " needs --node-addr: this node's IP address, where its stages listen");
    }
    if (flags.node_addr.find_first_of("/ \t[]") != std::string::npos) {
        return fail(ErrorCode::invalid_argument,
                    "--node-addr '" + flags.node_addr + "' is not an IP address");
    }
    return ok_status();
}

Result<StartedHub> start_head(const NodeFlags& flags, const config::RestartPolicy& restart,
                              const std::vector<std::string>& node_names) {
    OMNI_TRY(HostPort head, parse_host_port(flags.dist_init_addr));
    OMNI_TRY(auto hub, runner::NodeHub::create({.bind_endpoint = tcp_endpoint("*", head.port),
                                                .nnodes = flags.nnodes,
                                                .head_address = flags.node_addr,
                                                .node_timeout = seconds(flags.node_timeout_s),
                                                .restart = restart,
                                                .node_names = node_names}));
    std::cout << "omnirt serve: node 0 of " << flags.nnodes << ", waiting for " << flags.nnodes - 1
              << (flags.nnodes == 2 ? " node" : " nodes") << " on " << hub->endpoint() << std::endl;
    OMNI_TRY(auto addresses, hub->wait_for_nodes(seconds(flags.join_timeout_s)));
    return StartedHub{.hub = std::move(hub), .node_addresses = std::move(addresses)};
}

namespace {

// /health and /health/live of a node other than the head: its own processes only (the head's
// /health covers the whole pipeline).
Result<std::unique_ptr<serve::http::HttpServer>> node_health_server(
    const NodeFlags& flags, const std::string& host, int port,
    std::shared_ptr<runner::NodeAgentStatus> status) {
    OMNI_TRY(auto server,
             serve::http::HttpServer::create(
                 {.host = host, .port = static_cast<std::uint16_t>(port), .threads = 1}));
    const int rank = flags.node_rank;
    OMNI_RETURN_IF_ERROR(server->add_route("GET", "/health", [status, rank](auto http) {
        auto snapshot = status->get();
        nlohmann::json body = {{"status", snapshot.running ? "ok" : "unhealthy"},
                               {"node_rank", rank},
                               {"processes", snapshot.processes}};
        if (!snapshot.running) body["reason"] = snapshot.detail;
        if (!snapshot.node_name.empty()) body["node_name"] = snapshot.node_name;
        http->respond(snapshot.running ? 200 : 503, "application/json", body.dump());
    }));
    OMNI_RETURN_IF_ERROR(server->add_route("GET", "/health/live", [rank](auto http) {
        http->respond(200, "application/json",
                      nlohmann::json{{"status", "live"}, {"node_rank", rank}}.dump());
    }));
    OMNI_RETURN_IF_ERROR(server->start());
    return server;
}

}  // namespace

int run_node(const NodeFlags& flags, const std::string& host, int port) {
    auto head = parse_host_port(flags.dist_init_addr);
    if (!head) {
        std::cerr << "omnirt serve: " << head.error().message << "\n";
        return 2;
    }
    auto agent_status = std::make_shared<runner::NodeAgentStatus>();
    auto health = node_health_server(flags, host, port, agent_status);
    if (!health) {
        std::cerr << "omnirt serve: " << health.error().to_string() << "\n";
        return 1;
    }
    std::cout << "omnirt serve: node " << flags.node_rank << " of " << flags.nnodes
              << ", health on port " << (*health)->port() << std::endl;
    std::atomic<bool> stop{false};
    std::atomic<bool> done{false};
    // SIGINT / SIGTERM are blocked in every thread (serve did that); this one takes them.
    std::thread signals([&] {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        const timespec poll_interval{0, 100'000'000};
        while (!done) {
            if (sigtimedwait(&set, nullptr, &poll_interval) > 0) {
                spdlog::info("signal: node {} leaves", flags.node_rank);
                stop = true;
                return;
            }
        }
    });
    Status status = runner::run_node_agent({.head_endpoint = tcp_endpoint(head->host, head->port),
                                            .nnodes = flags.nnodes,
                                            .node_rank = flags.node_rank,
                                            .address = flags.node_addr,
                                            .join_timeout = seconds(flags.join_timeout_s),
                                            .status = agent_status},
                                           stop);
    done = true;
    (*health)->stop();
    signals.join();
    if (!status) {
        std::cerr << "omnirt serve: " << status.error().to_string() << "\n";
        return 1;
    }
    return 0;
}

}  // namespace omnirt::cli

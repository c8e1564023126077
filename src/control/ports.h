#pragma once
// The host's ephemeral port range (net.ipv4.ip_local_port_range): the ports the kernel gives to
// outgoing connections and to binds of port 0. A fixed port inside it can be taken at any moment
// by some connection's local end, so a stage that binds it again after a restart may find it in
// use. Fixed control-plane ports (endpoints.base_port) belong below it.
#include <optional>
#include <string>

namespace omnirt::control {

struct PortRange {
    int first = 0;
    int last = 0;
};

// Parses the two numbers of ip_local_port_range ("32768\t60999\n"); nullopt when malformed.
std::optional<PortRange> parse_port_range(const std::string& text);

// This host's range, read from /proc; nullopt where it cannot be read.
std::optional<PortRange> ephemeral_port_range();

// For a bind of `endpoint` that failed with "address in use": a sentence saying that its port
// lies in `range` and what to do, or "" when it does not (or is not a tcp://host:port).
std::string ephemeral_port_hint(const std::string& endpoint, std::optional<PortRange> range);

}  // namespace omnirt::control

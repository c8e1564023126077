#include "control/ports.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

namespace omnirt::control {

std::optional<PortRange> parse_port_range(const std::string& text) {
    std::istringstream in(text);
    long first = 0;
    long last = 0;
    std::string rest;
    if (!(in >> first >> last) || (in >> rest)) return std::nullopt;
    if (first < 1 || last > 65535 || first > last) return std::nullopt;
    return PortRange{static_cast<int>(first), static_cast<int>(last)};
}

std::optional<PortRange> ephemeral_port_range() {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return parse_port_range(text.str());
}

std::string ephemeral_port_hint(const std::string& endpoint, std::optional<PortRange> range) {
    constexpr std::string_view kTcp = "tcp://";
    if (!range || !endpoint.starts_with(kTcp)) return "";
    const auto colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon < kTcp.size()) return "";
    const std::string_view digits = std::string_view(endpoint).substr(colon + 1);
    int port = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (error != std::errc() || end != digits.data() + digits.size()) return "";
    if (port < range->first || port > range->last) return "";
    return "port " + std::to_string(port) + " lies in this host's ephemeral range " +
           std::to_string(range->first) + "-" + std::to_string(range->last) +
           " (net.ipv4.ip_local_port_range), where outgoing connections take their local ports; "
           "choose endpoints.base_port below " +
           std::to_string(range->first);
}

}  // namespace omnirt::control

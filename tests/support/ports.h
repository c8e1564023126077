#pragma once
// Fixed ports for tests that must name them before they bind (a TCP rendezvous, a pipeline's
// endpoints.base_port). They are taken below the host's ephemeral range: a port inside it can be
// taken by any outgoing connection's local end between the check and the bind, or between a
// process's death and its restart binding the port again.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cstdint>
#include <initializer_list>
#include <random>

#include "control/ports.h"

namespace omnirt::testing {

inline bool port_free(const char* address, int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address, &addr.sin_addr);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

// The first of `count` ports (count <= 10) free on each of `addresses`, a random multiple of 10
// from 10000 up to the ephemeral range; 0 when 200 tries found none.
inline int free_ports(int count, std::initializer_list<const char*> addresses = {"127.0.0.1"}) {
    std::mt19937 random(static_cast<unsigned>(::getpid()) ^ std::random_device{}());
    const auto ephemeral = control::ephemeral_port_range();
    const int top = ephemeral && ephemeral->first > 12000 ? ephemeral->first : 32768;
    const auto slots = static_cast<unsigned>((top - 10000) / 10 - 1);
    for (int attempt = 0; attempt < 200; ++attempt) {
        const int base = 10000 + static_cast<int>(random() % slots) * 10;
        bool ok = true;
        for (const char* address : addresses) {
            for (int port = base; ok && port < base + count; ++port) ok = port_free(address, port);
        }
        if (ok) return base;
    }
    return 0;
}

}  // namespace omnirt::testing

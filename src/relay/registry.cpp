#include "relay/registry.h"

#include <map>
#include <mutex>

#include "relay/c10d_loader.h"

namespace omnirt::relay {
namespace {

struct Backends {
    std::mutex mutex;
    std::map<std::string, RelayFactory> factories;
};

Backends& backends() {
    static Backends instance;
    return instance;
}

RelayFactory find_factory(const std::string& name) {
    auto& b = backends();
    std::lock_guard lock(b.mutex);
    auto it = b.factories.find(name);
    return it != b.factories.end() ? it->second : RelayFactory{};
}

// The backends in the libtorch-based c10d plugin (relay/c10d_loader.h), loaded on first use.
bool is_c10d(const std::string& name) { return name == "gloo" || name == "nccl"; }

// Why a backend the config accepts is missing from this build.
std::string unavailable_reason(const std::string& name) {
    if (name == "nixl" || name == "mooncake") {
        return "relay backend '" + name +
               "' is not available: it cannot be installed from omnirt's package sources "
               "(Debian and npm). Use 'ucx' for multi-node transfers (RDMA or TCP) or 'shm' on "
               "one host";
    }
    if (name == "nccl") {
        return "relay backend 'nccl' needs a CUDA build of libtorch; this build has none. Use "
               "'shm' or 'ucx' (or 'gloo' for a c10d process group on the CPU)";
    }
    return "relay backend '" + name + "' is not built into this omnirt";
}

}  // namespace

Status register_backend(const std::string& name, RelayFactory factory) {
    auto& b = backends();
    std::lock_guard lock(b.mutex);
    if (!b.factories.emplace(name, std::move(factory)).second) {
        return fail(ErrorCode::already_exists,
                    "relay backend '" + name + "' is already registered");
    }
    return {};
}

Result<std::unique_ptr<Relay>> create_relay(const RelayOptions& options) {
    RelayFactory factory = find_factory(options.backend);
    // Lazily loaded backends: the loader registers them (or explains why it cannot); it runs
    // without the registry's lock, which its registration takes.
    if (!factory && is_c10d(options.backend)) {
        if (auto loaded = ensure_c10d_backends(); !loaded) {
            return fail(loaded.error().with_context("relay backend '" + options.backend + "'"));
        }
        factory = find_factory(options.backend);
    }
    if (factory) return factory(options);
    for (const char* known : {"shm", "ucx", "gloo", "nccl", "nixl", "mooncake"}) {
        if (options.backend == known) {
            return fail(ErrorCode::unimplemented, unavailable_reason(options.backend));
        }
    }
    return fail(ErrorCode::not_found, "unknown relay backend '" + options.backend +
                                          "' (expected shm, ucx, gloo, nccl, nixl or mooncake)");
}

std::vector<std::string> registered_backends() {
    auto& b = backends();
    std::lock_guard lock(b.mutex);
    std::vector<std::string> names;
    for (const auto& [name, factory] : b.factories) names.push_back(name);
    return names;
}

}  // namespace omnirt::relay

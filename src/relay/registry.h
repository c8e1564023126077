#pragma once
// Relay backends by name. Each backend registers a factory from its own directory; asking for
// a backend this build or machine lacks is an error that says why and what to use instead.
//
// Thread safety: all functions may be called from any thread.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "relay/relay.h"

namespace omnirt::relay {

using RelayFactory = std::function<Result<std::unique_ptr<Relay>>(const RelayOptions&)>;

// Fails with already_exists for a taken name.
[[nodiscard]] Status register_backend(const std::string& name, RelayFactory factory);
// Creates a relay of options.backend. "gloo" and "nccl", when not registered yet, are loaded on
// demand: the first such call loads the libtorch-based c10d plugin once per process
// (relay/c10d_loader.h; it may take a second) and retries; a plugin that cannot be loaded is
// the loader's error, naming its path. unimplemented for nixl and mooncake (not installable from
// our package sources; use ucx), and for backends that are known but not built here (nccl
// without a CUDA libtorch); not_found for names nobody knows.
[[nodiscard]] Result<std::unique_ptr<Relay>> create_relay(const RelayOptions& options);
[[nodiscard]] std::vector<std::string> registered_backends();

}  // namespace omnirt::relay

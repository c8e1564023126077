#pragma once
// Registers the relay backends built into omnirt_relay (shm, ucx). Idempotent and thread-safe.
// The c10d backends register through relay/gloo/c10d_relay.h (a separate, libtorch-linked
// library).
#include "core/error.h"

namespace omnirt::relay {

[[nodiscard]] Status register_builtin_backends();

}  // namespace omnirt::relay

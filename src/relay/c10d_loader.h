#pragma once
// Loading the c10d relay backends (gloo, nccl) on demand. They link libtorch, which costs about a
// second at every exec, so neither omnirt_relay nor the omnirt binary links them. Instead the
// first create_relay for "gloo" or "nccl" that finds no such backend registered calls
// ensure_c10d_backends(), which dlopens the c10d plugin: a module library
// (src/relay/gloo/c10d_plugin.cpp, target omnirt_c10d_plugin) that exports
//
//     extern "C" int omnirt_c10d_plugin_abi_version();     // returns kC10dPluginAbiVersion
//     extern "C" int omnirt_c10d_plugin_register(char* error, int error_capacity);
//
// The registration adds "gloo" (and "nccl" where a CUDA libtorch and a GPU are present) to the
// relay registry and returns 0, or writes a NUL-terminated message of at most error_capacity - 1
// characters into `error` and returns non-zero. A plugin stays loaded for the life of the
// process: the factories it registered live in it.
//
// Thread safety: all functions may be called from any thread. None may be called while holding
// the relay registry's lock (the plugin's registration takes it).
#include <string>

#include "core/error.h"

namespace omnirt::relay {

// Bump when the plugin interface above, RelayOptions, Relay or register_backend change in a way
// that an older plugin would misread.
inline constexpr int kC10dPluginAbiVersion = 1;
// Names the plugin to load instead of the one this build made.
inline constexpr const char* kC10dPluginPathEnv = "OMNIRT_C10D_PLUGIN";

// $OMNIRT_C10D_PLUGIN when set and non-empty; otherwise the absolute path at which this build
// put the plugin; empty when this build made none.
[[nodiscard]] std::string c10d_plugin_path();

// Loads the plugin at `path` (as dlopen reads it: a name without '/' is searched for) and runs
// its registration. A file whose registration succeeded before is not registered again (ok).
// Errors, each naming the path: unimplemented when the file is missing or dlopen fails (with
// dlerror's reason); failed_precondition when the library is not a c10d plugin or was built
// for another ABI version; internal when its registration failed (with its message).
[[nodiscard]] Status load_c10d_plugin(const std::string& path);

// Once per process: load_c10d_plugin(c10d_plugin_path()). Later calls, and callers that arrive
// while the first one loads (they block), get the first call's result, failure included.
[[nodiscard]] Status ensure_c10d_backends();

}  // namespace omnirt::relay

#pragma once
// Shared-library plugins (`plugins:` in a pipeline config). A plugin is a shared object that
// exports
//
//     extern "C" int omnirt_plugin_abi_version();            // returns kPluginAbiVersion
//     extern "C" int omnirt_register_plugin(omnirt::Registry* registry,
//                                           char* error, int error_capacity);
//
// omnirt_register_plugin adds the plugin's factories and functions to the registry and returns
// 0, or writes a message into `error` and returns non-zero. OMNIRT_PLUGIN_ABI_VERSION_FN below
// writes the first function. Each path is loaded once per process; loading it again is a no-op.
#include <string>
#include <vector>

#include "core/error.h"
#include "core/registry.h"

namespace omnirt::config {

inline constexpr int kPluginAbiVersion = 1;

// Loads every plugin in order; stops at the first failure with an error naming the path and
// the reason (missing file, missing symbol, ABI mismatch, the plugin's own message).
[[nodiscard]] Status load_plugins(const std::vector<std::string>& paths, Registry& registry);

}  // namespace omnirt::config

#define OMNIRT_PLUGIN_ABI_VERSION_FN \
    extern "C" int omnirt_plugin_abi_version() { return ::omnirt::config::kPluginAbiVersion; }

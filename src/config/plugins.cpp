#include "config/plugins.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <mutex>
#include <set>

namespace omnirt::config {
namespace {

using AbiVersionFn = int (*)();
using RegisterFn = int (*)(Registry*, char*, int);

// Plugins stay loaded for the life of the process: the functions they registered live in them.
std::mutex loaded_mutex;
std::set<std::pair<std::string, Registry*>> loaded;

Status load_one(const std::string& path, Registry& registry) {
    char resolved[PATH_MAX];
    if (realpath(path.c_str(), resolved) == nullptr) {
        return fail(ErrorCode::not_found, "plugin '" + path + "' does not exist");
    }
    std::lock_guard lock(loaded_mutex);
    if (loaded.contains({resolved, &registry})) return {};

    void* handle = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = dlerror();
        return fail(ErrorCode::invalid_argument,
                    "plugin '" + path + "' could not be loaded: " + (why ? why : "unknown error"));
    }
    auto abi = reinterpret_cast<AbiVersionFn>(dlsym(handle, "omnirt_plugin_abi_version"));
    auto register_fn = reinterpret_cast<RegisterFn>(dlsym(handle, "omnirt_register_plugin"));
    if (abi == nullptr || register_fn == nullptr) {
        dlclose(handle);
        return fail(ErrorCode::invalid_argument,
                    "plugin '" + path +
                        "' is not an omnirt plugin: it must export omnirt_plugin_abi_version and "
                        "omnirt_register_plugin");
    }
    if (int version = abi(); version != kPluginAbiVersion) {
        dlclose(handle);
        return fail(ErrorCode::failed_precondition,
                    "plugin '" + path + "' was built for plugin ABI " + std::to_string(version) +
                        "; this omnirt has ABI " + std::to_string(kPluginAbiVersion));
    }
    char message[512] = {0};
    if (register_fn(&registry, message, sizeof message - 1) != 0) {
        // Entries it managed to add before failing stay registered and reference its code, so
        // the library is not unloaded.
        return fail(ErrorCode::invalid_argument,
                    "plugin '" + path + "' failed to register: " +
                        (message[0] ? std::string(message) : std::string("no reason given")));
    }
    loaded.insert({resolved, &registry});
    return {};
}

}  // namespace

Status load_plugins(const std::vector<std::string>& paths, Registry& registry) {
    for (const auto& path : paths) {
        OMNI_RETURN_IF_ERROR(load_one(path, registry));
    }
    return {};
}

}  // namespace omnirt::config

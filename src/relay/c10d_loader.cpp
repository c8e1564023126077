#include "relay/c10d_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <set>

// The build passes the module's absolute path (src/relay/gloo/CMakeLists.txt); a build without
// the c10d backends passes nothing.
#ifndef OMNIRT_C10D_PLUGIN_PATH
#define OMNIRT_C10D_PLUGIN_PATH ""
#endif

namespace omnirt::relay {
namespace {

using AbiVersionFn = int (*)();
using RegisterFn = int (*)(char*, int);

constexpr const char* kHint =
    "; the gloo and nccl relay backends need the libtorch-based c10d plugin (build the "
    "omnirt_c10d_plugin target, or set OMNIRT_C10D_PLUGIN to its path)";

// Handles whose registration succeeded. Guarded by the mutex, which also serialises loading.
struct Loaded {
    std::mutex mutex;
    std::set<void*> handles;
};

Loaded& loaded() {
    static Loaded instance;
    return instance;
}

std::string dl_reason() {
    const char* why = dlerror();
    return why != nullptr ? std::string(why) : std::string("unknown error");
}

}  // namespace

std::string c10d_plugin_path() {
    const char* from_env = std::getenv(kC10dPluginPathEnv);
    if (from_env != nullptr && from_env[0] != '\0') return from_env;
    return OMNIRT_C10D_PLUGIN_PATH;
}

Status load_c10d_plugin(const std::string& path) {
    if (path.empty()) {
        return fail(ErrorCode::unimplemented,
                    std::string("this omnirt was built without the c10d plugin") + kHint);
    }
    auto& state = loaded();
    std::lock_guard lock(state.mutex);
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        return fail(ErrorCode::unimplemented,
                    "c10d plugin '" + path + "' could not be loaded: " + dl_reason() + kHint);
    }
    if (state.handles.contains(handle)) {
        dlclose(handle);  // drops only the reference this call added
        return {};
    }
    auto abi = reinterpret_cast<AbiVersionFn>(dlsym(handle, "omnirt_c10d_plugin_abi_version"));
    auto register_fn = reinterpret_cast<RegisterFn>(dlsym(handle, "omnirt_c10d_plugin_register"));
    if (abi == nullptr || register_fn == nullptr) {
        dlclose(handle);
        return fail(ErrorCode::failed_precondition,
                    "'" + path +
                        "' is not an omnirt c10d plugin: it must export "
                        "omnirt_c10d_plugin_abi_version and omnirt_c10d_plugin_register");
    }
    if (int version = abi(); version != kC10dPluginAbiVersion) {
        dlclose(handle);
        return fail(ErrorCode::failed_precondition,
                    "c10d plugin '" + path + "' was built for c10d plugin ABI " +
                        std::to_string(version) + "; this omnirt has ABI " +
                        std::to_string(kC10dPluginAbiVersion) + kHint);
    }
    char message[512] = {0};
    if (register_fn(message, sizeof message) != 0) {
        // Backends it registered before failing reference its code: it stays loaded.
        message[sizeof message - 1] = '\0';
        return fail(ErrorCode::internal,
                    "c10d plugin '" + path + "' failed to register its backends: " +
                        (message[0] != '\0' ? std::string(message) : "no reason given"));
    }
    state.handles.insert(handle);
    return {};
}

Status ensure_c10d_backends() {
    static const Status status = load_c10d_plugin(c10d_plugin_path());
    return status;
}

}  // namespace omnirt::relay

// The c10d plugin (relay/c10d_loader.h): the module omnirt dlopens the first time a gloo or nccl
// relay is asked for, so that only processes using those backends load libtorch.
#include <cstdio>
#include <exception>
#include <string>

#include "relay/c10d_loader.h"
#include "relay/gloo/c10d_relay.h"

namespace {

void write_error(char* error, int capacity, const std::string& message) {
    if (error == nullptr || capacity <= 0) return;
    std::snprintf(error, static_cast<std::size_t>(capacity), "%s", message.c_str());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int omnirt_c10d_plugin_abi_version() {
    return omnirt::relay::kC10dPluginAbiVersion;
}

// Registers gloo (and nccl where available) with the relay registry; idempotent.
extern "C" __attribute__((visibility("default"))) int omnirt_c10d_plugin_register(
    char* error, int error_capacity) {
    try {
        if (auto status = omnirt::relay::register_c10d_backends(); !status) {
            write_error(error, error_capacity, status.error().to_string());
            return 1;
        }
        return 0;
    } catch (const std::exception& e) {  // nothing may cross the C boundary
        write_error(error, error_capacity, std::string("exception: ") + e.what());
    } catch (...) {
        write_error(error, error_capacity, "unknown exception");
    }
    return 1;
}

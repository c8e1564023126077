// Stand-ins for the c10d plugin (relay/c10d_loader.h), one module per FAKE_C10D_VARIANT:
//   registers    registers the backend "fake-c10d"; a second registration would fail, so a
//                loader that registers a plugin twice is caught
//   bad_abi      reports another ABI version
//   failing      registration fails with a message longer than the loader's buffer
//   no_register  exports only the ABI version
#include <cstdio>
#include <string>

#include "relay/c10d_loader.h"
#include "relay/registry.h"

#define FAKE_REGISTERS 0
#define FAKE_BAD_ABI 1
#define FAKE_FAILING 2
#define FAKE_NO_REGISTER 3

extern "C" int omnirt_c10d_plugin_abi_version() {
#if FAKE_C10D_VARIANT == FAKE_BAD_ABI
    return omnirt::relay::kC10dPluginAbiVersion + 1;
#else
    return omnirt::relay::kC10dPluginAbiVersion;
#endif
}

#if FAKE_C10D_VARIANT != FAKE_NO_REGISTER
extern "C" int omnirt_c10d_plugin_register(char* error, int error_capacity) {
#if FAKE_C10D_VARIANT == FAKE_FAILING
    std::string message = "fake registration failure " + std::string(2000, 'x');
    std::snprintf(error, static_cast<std::size_t>(error_capacity), "%s", message.c_str());
    return 1;
#else
    using namespace omnirt;
    auto status = relay::register_backend(
        "fake-c10d", [](const relay::RelayOptions&) -> Result<std::unique_ptr<relay::Relay> > {
            return fail(ErrorCode::unimplemented, "fake-c10d makes no relays");
        });
    if (!status) {
        std::snprintf(error, static_cast<std::size_t>(error_capacity), "%s",
                      status.error().message.c_str());
        return 1;
    }
    return 0;
#endif
}
#endif

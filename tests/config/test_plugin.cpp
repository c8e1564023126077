// A plugin for the `plugins:` tests: registers a factory and a route function. Setting
// OMNIRT_TEST_PLUGIN_FAIL in the environment makes registration fail with a message.
#include <cstdlib>
#include <cstring>

#include "config/plugins.h"

OMNIRT_PLUGIN_ABI_VERSION_FN

extern "C" int omnirt_register_plugin(omnirt::Registry* registry, char* error, int capacity) {
    if (std::getenv("OMNIRT_TEST_PLUGIN_FAIL") != nullptr) {
        std::strncpy(error, "asked to fail by OMNIRT_TEST_PLUGIN_FAIL", capacity);
        return 1;
    }
    omnirt::RouteFn route = [](const std::string&, const omnirt::StagePayload&)
        -> omnirt::Result<std::vector<std::string>> { return std::vector<std::string>{"next"}; };
    auto added =
        registry->add(omnirt::FunctionKind::route, "plugin_test.route", {.callable = route});
    if (!added.has_value()) {
        std::strncpy(error, added.error().message.c_str(), capacity);
        return 1;
    }
    added = registry->add(omnirt::FunctionKind::factory, "plugin_test.factory",
                          {.callable = 0, .injectable_args = {"model_path", "gpu_id"}});
    if (!added.has_value()) {
        std::strncpy(error, added.error().message.c_str(), capacity);
        return 1;
    }
    return 0;
}

// The Qwen3 stages as an omnirt plugin (`plugins:` in a pipeline config). The omnirt binary does
// not link libtorch; pipelines that need the model load this shared library instead, in the
// parent (to validate the config) and in every stage process (from the resolved plan).
#include <cstdio>

#include "config/plugins.h"
#include "models/qwen3/thinker_stage.h"

OMNIRT_PLUGIN_ABI_VERSION_FN

extern "C" int omnirt_register_plugin(omnirt::Registry* registry, char* error, int error_capacity) {
    auto registered = omnirt::models::qwen3::register_qwen3_stages(*registry);
    if (registered) return 0;
    if (error != nullptr && error_capacity > 0) {
        std::snprintf(error, static_cast<std::size_t>(error_capacity), "%s",
                      registered.error().message.c_str());
    }
    return 1;
}

// The S2-Pro stages that need libtorch (s2_pro.preprocess, s2_pro.tts, s2_pro.vocoder) as an omnirt
// plugin (`plugins:` in a pipeline config), loaded by the processes that host them.
#include <cstdio>

#include "config/plugins.h"
#include "models/s2_pro/preprocess_stage.h"
#include "models/s2_pro/tts_stage.h"
#include "models/s2_pro/vocoder_stage.h"

OMNIRT_PLUGIN_ABI_VERSION_FN

extern "C" int omnirt_register_plugin(omnirt::Registry* registry, char* error, int error_capacity) {
    auto registered = omnirt::models::s2_pro::register_tts_stage(*registry);
    if (registered) registered = omnirt::models::s2_pro::register_vocoder_stage(*registry);
    if (registered) registered = omnirt::models::s2_pro::register_preprocess_stage(*registry);
    if (registered) return 0;
    if (error != nullptr && error_capacity > 0) {
        std::snprintf(error, static_cast<std::size_t>(error_capacity), "%s",
                      registered.error().message.c_str());
    }
    return 1;
}

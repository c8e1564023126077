// The Qwen3-Omni stages that need libtorch (thinker, encoders, code2wav) as an omnirt plugin
// (`plugins:` in a pipeline config), loaded by the processes that host them.
#include <cstdio>

#include "config/plugins.h"
#include "models/qwen3_omni/code2wav_stage.h"
#include "models/qwen3_omni/encoder_stages.h"
#include "models/qwen3_omni/talker_stage.h"
#include "models/qwen3_omni/thinker_stage.h"

OMNIRT_PLUGIN_ABI_VERSION_FN

extern "C" int omnirt_register_plugin(omnirt::Registry* registry, char* error, int error_capacity) {
    auto registered = omnirt::models::qwen3_omni::register_thinker_stage(*registry);
    if (registered) registered = omnirt::models::qwen3_omni::register_encoder_stages(*registry);
    if (registered) registered = omnirt::models::qwen3_omni::register_code2wav_stage(*registry);
    if (registered) registered = omnirt::models::qwen3_omni::register_talker_stage(*registry);
    if (registered) return 0;
    if (error != nullptr && error_capacity > 0) {
        std::snprintf(error, static_cast<std::size_t>(error_capacity), "%s",
                      registered.error().message.c_str());
    }
    return 1;
}

#include "core/request.h"

namespace omnirt {

Result<bool> wants_audio_output(const OmniRequest& request) {
    const Value* api = request.metadata.find("api");
    if (api != nullptr && api->is_string() && api->as_string() == "audio.speech") return true;
    const Value* modalities = request.inputs.find("modalities");
    if (modalities == nullptr || modalities->is_null()) return false;
    auto refuse = [] {
        return fail(ErrorCode::invalid_argument, "inputs.modalities must be a list of strings");
    };
    const List* list = modalities->if_list();
    if (list == nullptr) return refuse();
    bool audio = false;
    for (const Value& item : *list) {
        const std::string* name = item.if_string();
        if (name == nullptr) return refuse();
        audio = audio || *name == "audio";
    }
    return audio;
}

}  // namespace omnirt

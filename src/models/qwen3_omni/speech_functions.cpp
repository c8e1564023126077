#include "models/qwen3_omni/speech_functions.h"

#include <optional>
#include <string>
#include <vector>

namespace omnirt::models::qwen3_omni {
namespace {

Error invalid(std::string message) {
    return Error{ErrorCode::invalid_argument, "qwen3_omni: " + std::move(message)};
}

bool is_speech(const OmniRequest& request) {
    const Value* api = request.metadata.find("api");
    return api != nullptr && api->is_string() && api->as_string() == "audio.speech";
}

std::vector<std::string> stages(std::string_view first, bool audio, std::string_view second) {
    std::vector<std::string> out;
    if (!first.empty()) out.emplace_back(first);
    if (audio) out.emplace_back(second);
    return out;
}

Result<StagePayload> project_to_talker(const std::string&, const StagePayload& output) {
    StagePayload projected;
    projected.request_id = output.request_id;
    projected.request = output.request;
    Map data;
    if (const Map* map = output.data.if_map()) {
        for (const char* key : {"input_ids", "positions", "rope_delta"}) {
            if (auto it = map->find(key); it != map->end()) data.emplace(key, it->second);
        }
    }
    projected.data = Value(std::move(data));
    return projected;
}

}  // namespace

Result<bool> omni_wants_audio(const OmniRequest& request) {
    auto audio = wants_audio_output(request);
    if (!audio) return fail(invalid(audio.error().message));
    return *audio;
}

Result<std::string> omni_requested_voice(const OmniRequest& request) {
    const bool speech = is_speech(request);
    const Value* holder = speech ? &request.inputs : request.inputs.find("audio");
    if (holder == nullptr || holder->is_null()) return std::string();
    if (!holder->is_map()) return fail(invalid("inputs.audio must be a map"));
    const Value* voice = holder->find("voice");
    if (voice == nullptr || voice->is_null()) return std::string();
    const std::string* name = voice->if_string();
    if (name == nullptr) {
        return fail(
            invalid(std::string(speech ? "inputs" : "inputs.audio") + ".voice must be a string"));
    }
    return *name;
}

Status register_speech_functions(Registry& registry) {
    auto add = [&](FunctionKind kind, const std::string& name, auto callable) {
        return registry.add_if_absent(kind, name, RegistryEntry{.callable = std::move(callable)});
    };
    OMNI_RETURN_IF_ERROR(
        add(FunctionKind::route, "qwen3_omni.route_speech",
            RouteFn([](const std::string&,
                       const StagePayload& output) -> Result<std::vector<std::string>> {
                OMNI_TRY(bool audio, omni_wants_audio(output.request));
                return stages(kSpeechThinkerStage, audio, kSpeechTalkerStage);
            })));
    OMNI_RETURN_IF_ERROR(
        add(FunctionKind::stream_done, "qwen3_omni.thinker_stream_done",
            StreamDoneFn([](const std::string&,
                            const StagePayload& output) -> Result<std::vector<std::string>> {
                OMNI_TRY(bool audio, omni_wants_audio(output.request));
                return stages(kSpeechDecodeStage, audio, kSpeechTalkerStage);
            })));
    OMNI_RETURN_IF_ERROR(
        add(FunctionKind::terminal_stages, "qwen3_omni.speech_terminals",
            TerminalStagesFn(
                [](const OmniRequest& request) -> Result<std::optional<std::vector<std::string>>> {
                    OMNI_TRY(bool audio, omni_wants_audio(request));
                    return std::optional(stages(kSpeechDecodeStage, audio, kSpeechCode2WavStage));
                })));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::projection, "qwen3_omni.project_to_talker",
                             ProjectionFn(project_to_talker)));
    return ok_status();
}

}  // namespace omnirt::models::qwen3_omni

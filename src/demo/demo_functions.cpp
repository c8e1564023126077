// The demo pipeline's request readers (audio wanted, token delay, voice), its request-aware
// functions (route, stream_done, terminal_stages), tokenization and registration.
#include <utility>

#include "demo/demo_stages.h"

namespace omnirt::demo {
namespace {

constexpr std::string_view kSpeechApi = "audio.speech";

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

Error invalid(std::string message) {
    return Error{ErrorCode::invalid_argument, "demo: " + std::move(message)};
}

bool is_speech(const OmniRequest& request) {
    const Value* api = request.metadata.find("api");
    return api != nullptr && api->is_string() && api->as_string() == kSpeechApi;
}

std::vector<std::string> stages_for(bool audio, bool with_decode) {
    std::vector<std::string> stages;
    if (with_decode) stages.emplace_back(kDemoDecodeStage);
    if (audio) stages.emplace_back(kDemoTalkerStage);
    return stages;
}

Result<std::vector<std::string>> route_thinker(const std::string&, const StagePayload& output) {
    OMNI_TRY(bool audio, demo_wants_audio(output.request));
    return stages_for(audio, true);
}

// The talker hears of a request only when it is routed there, so it never waits for a payload
// that will not come.
Result<std::vector<std::string>> thinker_stream_done(const std::string&,
                                                     const StagePayload& output) {
    OMNI_TRY(bool audio, demo_wants_audio(output.request));
    return stages_for(audio, false);
}

Result<std::optional<std::vector<std::string>>> terminal_stages(const OmniRequest& request) {
    OMNI_TRY(bool audio, demo_wants_audio(request));
    return std::optional(stages_for(audio, true));
}

}  // namespace

Result<bool> demo_wants_audio(const OmniRequest& request) {
    auto audio = wants_audio_output(request);
    if (!audio) return fail(invalid(audio.error().message));
    return *audio;
}

Result<std::chrono::milliseconds> demo_token_delay(const OmniRequest& request,
                                                   std::string_view stage_name) {
    const Value* all = request.params.find("stage_params");
    if (all == nullptr || all->is_null()) return std::chrono::milliseconds(0);
    if (!all->is_map()) return fail(invalid("params.stage_params must be a map"));
    const Value* mine = all->find(stage_name);
    if (mine == nullptr || mine->is_null()) return std::chrono::milliseconds(0);
    const std::string where = "params.stage_params." + std::string(stage_name);
    if (!mine->is_map()) return fail(invalid(where + " must be a map"));
    const Value* delay = mine->find("token_delay_ms");
    if (delay == nullptr || delay->is_null()) return std::chrono::milliseconds(0);
    const std::int64_t* ms = delay->if_int();
    if (ms == nullptr || *ms < 0 || *ms > kDemoMaxTokenDelayMs) {
        return fail(invalid(where + ".token_delay_ms must be an integer in [0, " +
                            std::to_string(kDemoMaxTokenDelayMs) + "], got " +
                            delay->debug_string()));
    }
    return std::chrono::milliseconds(*ms);
}

Result<DemoVoiceSettings> demo_voice_settings(const OmniRequest& request) {
    DemoVoiceSettings settings;
    const bool speech = is_speech(request);
    const Value* holder = speech ? &request.inputs : request.inputs.find("audio");
    const std::string prefix = speech ? "inputs." : "inputs.audio.";
    if (holder == nullptr || holder->is_null()) return settings;
    if (!holder->is_map()) return fail(invalid("inputs.audio must be a map"));
    if (const Value* voice = holder->find("voice"); voice != nullptr && !voice->is_null()) {
        const std::string* name = voice->if_string();
        if (name == nullptr) return fail(invalid(prefix + "voice must be a string"));
        settings.voice = *name;
    }
    if (!speech) return settings;
    if (const Value* speed = request.inputs.find("speed"); speed != nullptr && !speed->is_null()) {
        if (!speed->is_number() || speed->as_number() < kDemoMinSpeed ||
            speed->as_number() > kDemoMaxSpeed) {
            return fail(invalid("inputs.speed must be a number in [0.25, 4], got " +
                                speed->debug_string()));
        }
        settings.speed = speed->as_number();
    }
    return settings;
}

std::vector<std::string> split_demo_tokens(std::string_view text) {
    std::vector<std::string> tokens;
    std::size_t start = 0;  // where the current token begins
    std::size_t i = 0;
    while (i < text.size() && is_space(text[i])) ++i;
    while (i < text.size()) {
        while (i < text.size() && !is_space(text[i])) ++i;
        while (i < text.size() && is_space(text[i])) ++i;
        tokens.emplace_back(text.substr(start, i - start));
        start = i;
    }
    return tokens;
}

std::int64_t count_demo_words(std::string_view text) {
    std::int64_t words = 0;
    bool in_word = false;
    for (char c : text) {
        if (!is_space(c) && !in_word) ++words;
        in_word = !is_space(c);
    }
    return words;
}

Status register_demo_stages(Registry& registry) {
    OMNI_RETURN_IF_ERROR(demo_stages_detail::register_thinker_stages(registry));
    OMNI_RETURN_IF_ERROR(demo_stages_detail::register_talker_stage(registry));
    OMNI_RETURN_IF_ERROR(registry.add_if_absent(
        FunctionKind::route, "demo.route_thinker",
        RegistryEntry{.callable = RouteFn(route_thinker),
                      .description = "[decode], plus talker when the request wants audio"}));
    OMNI_RETURN_IF_ERROR(registry.add_if_absent(
        FunctionKind::stream_done, "demo.thinker_stream_done",
        RegistryEntry{.callable = StreamDoneFn(thinker_stream_done),
                      .description = "[talker] when the request wants audio, else none"}));
    return registry.add_if_absent(
        FunctionKind::terminal_stages, "demo.terminal_stages",
        RegistryEntry{.callable = TerminalStagesFn(terminal_stages),
                      .description = "[decode], plus talker when the request wants audio"});
}

}  // namespace omnirt::demo

#include "models/qwen3_omni/thinker_stage.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "engine/ar_sequence.h"
#include "models/qwen3/thinker_stage.h"
#include "models/qwen3_omni/speech_functions.h"
#include "models/qwen3_omni/talker_config.h"
#include "models/qwen3_omni/thinker_inputs.h"
#include "models/qwen3_omni/thinker_model.h"
#include "pipeline/stage_args.h"
#include "pipeline/stage_factory.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

// DeepStack adds to the outputs of at most this many leading decoder layers (three taps).
constexpr std::int32_t kMaxDeepstackLayers = 3;

// What a request that streams to the talker keeps: where its captured media rows start and what
// DeepStack added to them at the captured depth (transformers v5 records hidden_states before
// that addition, so it is taken off again; zero past layer 3, as for the released layer 24).
struct SpeechRequest final : engine::RoleRequestState {
    std::int64_t begin = 0;
    at::Tensor added;  // [rows, hidden] or undefined
};

// The talker side of the thinker: which layer it captures, and which stream target is the
// talker (text-only requests do not stream there).
struct SpeechSide {
    std::int64_t accept_layer = -1;  // -1: the checkpoint has no talker
    std::vector<std::string> stream_to;
    OmniTokenIds ids;
};

Result<SpeechSide> speech_side(const pipeline::StageContext& context) {
    SpeechSide side;
    side.stream_to = context.stream_to;
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) return side;  // the thinker factory names the missing arg
    auto json = checkpoint::read_json_file(std::filesystem::path(model_path) / "config.json");
    if (!json) return side;  // likewise
    OMNI_TRY(OmniConfig omni, parse_omni_config(*json));
    side.ids = omni.ids;
    if (omni.talker_config.is_null()) return side;
    OMNI_TRY(TalkerConfig talker, parse_talker_config(omni));
    side.accept_layer = talker.accept_hidden_layer;
    return side;
}

bool streams_to_talker(const engine::ArSequence& sequence) {
    const auto& targets = sequence.stream_targets();
    return std::find(targets.begin(), targets.end(), kSpeechTalkerStage) != targets.end();
}

// Adds the capture of the media rows' hidden states at the talker's layer for requests that
// want audio.
Status add_speech_capture(const SpeechSide& side, const StagePayload& payload,
                          engine::RequestSetup& setup, std::int64_t hidden) {
    if (side.accept_layer < 0) return ok_status();
    OMNI_TRY(bool audio, omni_wants_audio(payload.request));
    if (!audio) return ok_status();
    std::int64_t first = -1;
    std::int64_t last = -1;
    for (std::size_t row = 0; row < setup.prompt.size(); ++row) {
        if (is_media_pad(setup.prompt[row], side.ids)) {
            if (first < 0) first = static_cast<std::int64_t>(row);
            last = static_cast<std::int64_t>(row);
        }
    }
    if (first < 0) return ok_status();
    const auto layer = static_cast<std::int32_t>(side.accept_layer);
    setup.captures.push_back({.after_layers = layer, .begin = first, .end = last + 1});
    auto state = std::make_unique<SpeechRequest>();
    state->begin = first;
    for (const engine::LayerRun& run : setup.layer_injections) {
        if (run.after_layers != layer) continue;
        if (!state->added.defined()) state->added = at::zeros({last + 1 - first, hidden});
        const std::int64_t begin = std::max(run.add.begin, first);
        const std::int64_t end = std::min(run.add.begin + run.add.values.size(0), last + 1);
        if (begin >= end) continue;
        state->added.narrow(0, begin - first, end - begin)
            .add_(run.add.values.narrow(0, begin - run.add.begin, end - begin).to(at::kFloat));
    }
    setup.state = std::move(state);
    return ok_status();
}

Status speech_fields(engine::ArSequence& sequence, const engine::TokenStep& step,
                     engine::TokenFields& fields) {
    if (!streams_to_talker(sequence)) return ok_status();
    fields.targets.insert_or_assign("stop", Value(step.stop));
    const auto* state = sequence.role_state<SpeechRequest>();
    if (step.index != 0 || state == nullptr || sequence.captures().empty()) return ok_status();
    at::Tensor rows = sequence.captures().front().rows();
    if (!rows.defined()) return ok_status();
    rows = rows.to(at::kCPU, at::kFloat, false, true).contiguous();
    if (state->added.defined()) rows.sub_(state->added);
    OMNI_TRY(Tensor converted, torch_bridge::from_torch(rows));
    fields.targets.insert_or_assign("talker_hidden", Value(std::move(converted)));
    fields.targets.insert_or_assign("talker_hidden_begin", Value(state->begin));
    return ok_status();
}

qwen3::ThinkerStageVariant thinker_variant(SpeechSide side) {
    auto shared = std::make_shared<const SpeechSide>(std::move(side));
    return {.factory_name = "qwen3_omni.thinker",
            .config_pointer = "/thinker_config/text_config",
            .weight_prefix = "thinker.",
            .rotary = [](const qwen3::Qwen3Config& config,
                         at::Device device) -> Result<std::unique_ptr<qwen3::RotaryEmbedding>> {
                OMNI_TRY(auto sections, mrope_sections(config));
                return std::unique_ptr<qwen3::RotaryEmbedding>(
                    std::make_unique<qwen3::InterleavedMRotaryEmbedding>(
                        static_cast<int>(config.head_dim), config.rope_theta,
                        config.max_position_embeddings, sections, device));
            },
            .extend_setup = [shared](const qwen3::Qwen3Config& config) -> engine::ExtendSetupFn {
                const std::int64_t hidden = config.hidden_size;
                const auto layers = static_cast<std::int32_t>(
                    std::min<std::int64_t>(kMaxDeepstackLayers, config.num_hidden_layers));
                return [hidden, layers, shared](const StagePayload& payload,
                                                engine::RequestSetup& setup) -> Status {
                    OMNI_RETURN_IF_ERROR(read_thinker_inputs(payload, hidden, layers, setup));
                    return add_speech_capture(*shared, payload, setup, hidden);
                };
            },
            .stream_targets_for =
                [shared](const StagePayload& payload) -> Result<std::vector<std::string>> {
                OMNI_TRY(bool audio, omni_wants_audio(payload.request));
                std::vector<std::string> targets;
                for (const std::string& target : shared->stream_to) {
                    if (audio || target != kSpeechTalkerStage) targets.push_back(target);
                }
                return targets;
            },
            .token_fields = speech_fields};
}

}  // namespace

Status register_thinker_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, "qwen3_omni.thinker",
        RegistryEntry{
            .callable = pipeline::StageFactory([](const pipeline::StageContext& context)
                                                   -> Result<std::unique_ptr<pipeline::Scheduler>> {
                OMNI_TRY(SpeechSide side, speech_side(context));
                return qwen3::make_thinker_stage(context, thinker_variant(std::move(side)));
            }),
            .injectable_args = {"model_path", "gpu_id"},
            .description = "Qwen3-Omni thinker on the AR engine: media embeddings, DeepStack and "
                           "3-D positions from mm_aggregate; text streamed; for requests that "
                           "want audio, token ids and the talker's hidden rows streamed to the "
                           "talker; data = {text, finish_reason, usage, output_ids}"});
}

}  // namespace omnirt::models::qwen3_omni

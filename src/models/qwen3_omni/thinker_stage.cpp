#include "models/qwen3_omni/thinker_stage.h"

#include "models/qwen3/thinker_stage.h"
#include "models/qwen3_omni/thinker_inputs.h"
#include "models/qwen3_omni/thinker_model.h"
#include "pipeline/stage_factory.h"

namespace omnirt::models::qwen3_omni {
namespace {

// DeepStack adds to the outputs of at most this many leading decoder layers (three taps).
constexpr std::int32_t kMaxDeepstackLayers = 3;

qwen3::ThinkerStageVariant thinker_variant() {
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
            .extend_setup = [](const qwen3::Qwen3Config& config) -> engine::ExtendSetupFn {
                const std::int64_t hidden = config.hidden_size;
                const auto layers = static_cast<std::int32_t>(
                    std::min<std::int64_t>(kMaxDeepstackLayers, config.num_hidden_layers));
                return [hidden, layers](const StagePayload& payload, engine::RequestSetup& setup) {
                    return read_thinker_inputs(payload, hidden, layers, setup);
                };
            }};
}

}  // namespace

Status register_thinker_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, "qwen3_omni.thinker",
        RegistryEntry{.callable = pipeline::StageFactory([](const pipeline::StageContext& context) {
                          return qwen3::make_thinker_stage(context, thinker_variant());
                      }),
                      .injectable_args = {"model_path", "gpu_id"},
                      .description = "Qwen3-Omni thinker on the AR engine: media embeddings, "
                                     "DeepStack and 3-D positions from mm_aggregate; text "
                                     "streamed; data = {text, finish_reason, usage, output_ids}"});
}

}  // namespace omnirt::models::qwen3_omni

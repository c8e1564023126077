#include "models/qwen3_omni/family.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "models/qwen3/family.h"
#include "models/qwen3_omni/make_checkpoint.h"
#include "models/qwen3_omni/omni_config.h"
#include "models/qwen3_omni/omni_stages.h"
#include "models/qwen3_omni/talker_config.h"

namespace omnirt::models::qwen3_omni {
namespace {

// Shards as the release cuts them, scaled to the preset: even the tiny checkpoint comes as
// several files and an index. An explicit --max-shard-bytes wins.
std::uint64_t shard_bytes(const CheckpointRequest& request) {
    if (request.max_shard_bytes != checkpoint::kDefaultMaxShardBytes) {
        return request.max_shard_bytes;
    }
    if (request.preset == "tiny") return 8ull << 20;
    if (request.preset == "small") return 256ull << 20;
    return 4ull << 30;
}

Result<models::MadeCheckpoint> make(const std::filesystem::path& directory,
                                    const CheckpointRequest& request) {
    if (request.moe) {
        return fail(ErrorCode::invalid_argument,
                    "--moe: Qwen3-Omni's thinker and talker are always mixtures of experts");
    }
    OMNI_TRY(qwen3_omni::MadeCheckpoint made,
             make_checkpoint(directory, {.preset = request.preset,
                                         .seed = request.seed,
                                         .dtype = request.dtype,
                                         .init_std = request.init_std,
                                         .max_shard_bytes = shard_bytes(request),
                                         .overwrite = request.overwrite,
                                         .progress = request.progress}));
    return models::MadeCheckpoint{.description = "qwen3_omni " + request.preset,
                                  .weights = std::move(made.weights)};
}

Result<nlohmann::json> preset_config(const std::string& preset, const std::string& dtype) {
    OMNI_TRY(nlohmann::ordered_json config, omni_preset(preset, dtype));
    return nlohmann::json(config);
}

Result<DecodeFootprint> decode_footprint(const nlohmann::json& json) {
    OMNI_TRY(OmniConfig config, parse_omni_config(json));
    (void)config;
    return qwen3::text_decode_footprint(json["thinker_config"]["text_config"]);
}

// The talker's speakers (talker_config.speaker_id); none when the config has no talker.
std::vector<std::string> voices(const nlohmann::json& json) {
    auto config = parse_omni_config(json);
    if (!config || config->talker_config.is_null()) return {};
    auto talker = parse_talker_config(*config);
    if (!talker) return {};
    std::vector<std::string> out;
    for (const auto& [name, id] : talker->speakers) out.push_back(name);
    return out;
}

}  // namespace

Status register_family(FamilyRegistry& registry) {
    return registry.add(ModelFamily{.name = "qwen3_omni",
                                    .arch_ids = {std::string(kModelType)},
                                    .architectures = {std::string(kArchitecture)},
                                    .presets = omni_preset_names(),
                                    .serve_by_default = true,
                                    .make_checkpoint = make,
                                    .preset_config = preset_config,
                                    .decode_footprint = decode_footprint,
                                    .render_chat = {},
                                    .voices = voices,
                                    .register_stages = [] { return register_omni_stages(); },
                                    .ar_stage_factory = {},
                                    .serve = {.pipeline_yaml = speech_pipeline_yaml(),
                                              .plugin_file = "libomnirt_qwen3_omni_plugin.so",
                                              .plugin_env = "OMNIRT_QWEN3_OMNI_PLUGIN",
                                              .default_checkpoint_name = "qwen3-omni-tiny-v1",
                                              .default_preset = "tiny"}});
}

}  // namespace omnirt::models::qwen3_omni

#include "models/s2_pro/family.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "models/s2_pro/config.h"
#include "models/s2_pro/make_checkpoint.h"
#include "models/s2_pro/weights.h"

namespace omnirt::models::s2_pro {
namespace {

// Shards as the release cuts them (two files of about 5 GB), scaled to the preset; an explicit
// --max-shard-bytes wins.
std::uint64_t shard_bytes(const CheckpointRequest& request) {
    if (request.max_shard_bytes != checkpoint::kDefaultMaxShardBytes) {
        return request.max_shard_bytes;
    }
    if (request.preset == "tiny") return 8ull << 20;
    if (request.preset == "small") return 64ull << 20;
    return 5ull << 30;
}

Result<models::MadeCheckpoint> make(const std::filesystem::path& directory,
                                    const CheckpointRequest& request) {
    if (request.moe) {
        return fail(ErrorCode::invalid_argument, "--moe: S2-Pro has no mixture-of-experts variant");
    }
    OMNI_TRY(s2_pro::MadeCheckpoint made,
             make_checkpoint(directory, {.preset = request.preset,
                                         .seed = request.seed,
                                         .dtype = request.dtype,
                                         .init_std = request.init_std,
                                         .max_shard_bytes = shard_bytes(request),
                                         .overwrite = request.overwrite,
                                         .progress = request.progress}));
    return models::MadeCheckpoint{.description = "s2_pro " + request.preset,
                                  .weights = std::move(made.weights)};
}

Result<nlohmann::json> preset_config(const std::string& preset, const std::string& dtype) {
    OMNI_TRY(nlohmann::ordered_json config, s2_pro_preset(preset, dtype));
    return nlohmann::json(config);
}

std::int64_t elements(const Shape& shape) {
    std::int64_t count = 1;
    for (std::int64_t extent : shape) count *= extent;
    return count;
}

// One frame of decode: the slow AR step (its layers and the tied head over the whole vocabulary)
// plus the fast AR's codebooks passes (counted once per frame: every pass reads its layers).
Result<DecodeFootprint> decode_footprint(const nlohmann::json& json) {
    OMNI_TRY(S2ProConfig config, parse_s2_pro_config(json));
    const FishDecoderConfig& text = config.text;
    DecodeFootprint footprint{.description = "s2_pro slow AR dim " + std::to_string(text.dim) +
                                             ", " + std::to_string(text.n_layer) +
                                             " layers + fast AR " +
                                             std::to_string(config.audio.n_layer) + " layers x " +
                                             std::to_string(config.num_codebooks) + " codebooks",
                              .vocab_size = text.vocab_size,
                              .embedding_row_elements = text.dim * (1 + config.num_codebooks)};
    const std::string embeddings = std::string(kTextPrefix) + "embeddings.weight";
    const std::string codebooks = std::string(kAudioPrefix) + "codebook_embeddings.weight";
    for (const checkpoint::ExpectedTensor& tensor : s2_pro_expected_tensors(config)) {
        const std::int64_t count = elements(tensor.shape);
        footprint.parameters += count;
        if (tensor.name == embeddings || tensor.name == codebooks) continue;
        const bool fast = tensor.name.starts_with(kAudioPrefix);
        footprint.dense_elements += fast ? count * config.num_codebooks : count;
    }
    if (text.tie_word_embeddings) footprint.dense_elements += text.vocab_size * text.dim;
    footprint.kv_elements_per_token = 2 * text.n_layer * text.n_local_heads * text.head_dim;
    return footprint;
}

}  // namespace

Status register_family(FamilyRegistry& registry) {
    return registry.add(ModelFamily{.name = "s2_pro",
                                    .arch_ids = {std::string(kModelType)},
                                    .architectures = {std::string(kArchitecture)},
                                    .presets = s2_pro_preset_names(),
                                    .serve_by_default = false,
                                    .make_checkpoint = make,
                                    .preset_config = preset_config,
                                    .decode_footprint = decode_footprint,
                                    .render_chat = {},
                                    .voices = {},
                                    .clones_voices = true,
                                    .register_stages = {},
                                    .ar_stage_factory = "s2_pro.tts",
                                    .serve = {.pipeline_yaml = tts_pipeline_yaml(),
                                              .plugin_file = "libomnirt_s2_pro_plugin.so",
                                              .plugin_env = "OMNIRT_S2_PRO_PLUGIN",
                                              .default_checkpoint_name = "s2-pro-tiny-v1",
                                              .default_preset = "tiny"}});
}

}  // namespace omnirt::models::s2_pro

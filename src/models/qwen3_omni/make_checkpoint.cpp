#include "models/qwen3_omni/make_checkpoint.h"

#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/dummy.h"
#include "checkpoint/generated.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "models/qwen3_omni/omni_weights.h"

namespace omnirt::models::qwen3_omni {
namespace {

using ordered_json = nlohmann::ordered_json;

std::int64_t real_id(std::int64_t tiny_id) {
    return tiny_id - qwen3::kTinyFirstSpecialId + qwen3::kQwenFirstSpecialId;
}

// The id of a word the tiny tokenizer keeps as one token, else `fallback`.
std::int64_t single_token(const qwen3::TinyTokenizerFiles& files, std::string_view word,
                          std::int64_t fallback) {
    const std::vector<std::string> pieces = qwen3::tiny_bpe(word);
    if (pieces.size() != 1) return fallback;
    const ordered_json& vocab = files.tokenizer["model"]["vocab"];
    auto it = vocab.find(pieces[0]);
    return it == vocab.end() ? fallback : it->get<std::int64_t>();
}

}  // namespace

OmniTokenizerFiles omni_tokenizer_files() {
    const qwen3::TinyTokenizerFiles& tiny = qwen3::tiny_tokenizer_files();
    OmniTokenizerFiles files{
        .tokenizer = tiny.tokenizer, .tokenizer_config = tiny.tokenizer_config, .role_ids = {}};
    for (ordered_json& token : files.tokenizer["added_tokens"]) {
        token["id"] = real_id(token["id"].get<std::int64_t>());
    }
    ordered_json decoder = ordered_json::object();
    for (auto& [key, value] : files.tokenizer_config["added_tokens_decoder"].items()) {
        decoder[std::to_string(real_id(std::stoll(key)))] = value;
    }
    files.tokenizer_config["added_tokens_decoder"] = std::move(decoder);
    // The processor finds its placeholders through these tokenizer attributes.
    const ordered_json named = {
        {"audio_bos_token", "<|audio_start|>"}, {"audio_eos_token", "<|audio_end|>"},
        {"audio_token", "<|audio_pad|>"},       {"image_token", "<|image_pad|>"},
        {"video_token", "<|video_pad|>"},       {"vision_bos_token", "<|vision_start|>"},
        {"vision_eos_token", "<|vision_end|>"}};
    for (const auto& [key, value] : named.items()) files.tokenizer_config[key] = value;
    files.tokenizer_config["extra_special_tokens"] = named;
    OmniTokenIds& roles = files.role_ids;
    roles.system = single_token(tiny, "system", roles.system);
    roles.user = single_token(tiny, "user", roles.user);
    roles.assistant = single_token(tiny, "assistant", roles.assistant);
    return files;
}

ordered_json omni_preprocessor_config() {
    return {
        {"chunk_length", 300},
        {"dither", 0.0},
        {"feature_extractor_type", "WhisperFeatureExtractor"},
        {"feature_size", 128},
        {"hop_length", 160},
        {"image_mean", {0.5, 0.5, 0.5}},
        {"image_processor_type", "Qwen2VLImageProcessor"},
        {"image_std", {0.5, 0.5, 0.5}},
        {"max_pixels", 12845056},
        {"merge_size", 2},
        {"min_pixels", 3136},
        {"n_fft", 400},
        {"n_samples", 4800000},
        {"nb_max_frames", 30000},
        {"padding_side", "right"},
        {"padding_value", 0.0},
        {"patch_size", 16},
        {"processor_class", "Qwen3OmniMoeProcessor"},
        {"return_attention_mask", true},
        {"sampling_rate", 16000},
        {"temporal_patch_size", 2},
    };
}

Result<MadeCheckpoint> make_checkpoint(const std::filesystem::path& directory,
                                       const MakeCheckpointOptions& options) {
    if (!checkpoint::is_convertible_float(options.dtype)) {
        return fail(ErrorCode::invalid_argument,
                    "dtype " + std::string(to_string(options.dtype)) +
                        " is not a weight dtype (bfloat16, float16, float32)");
    }
    if (!(options.init_std >= 0)) {
        return fail(ErrorCode::invalid_argument, "init_std must not be negative");
    }
    const OmniTokenizerFiles tokenizer = omni_tokenizer_files();
    OMNI_TRY(ordered_json json,
             omni_preset(options.preset, checkpoint::torch_dtype_name(options.dtype),
                         tokenizer.role_ids));
    OMNI_TRY(OmniConfig config, parse_omni_config(nlohmann::json(json)));
    OMNI_TRY(std::vector<checkpoint::TensorSpec> specs, omni_tensor_specs(config, options.dtype));
    OMNI_RETURN_IF_ERROR(checkpoint::prepare_checkpoint_directory(directory, options.overwrite));

    std::vector<checkpoint::TensorSource> sources;
    sources.reserve(specs.size());
    const checkpoint::DummyInit init{.seed = options.seed, .std = options.init_std};
    for (const checkpoint::TensorSpec& spec : specs) {
        sources.push_back(checkpoint::dummy_source(spec, init));
    }
    OMNI_TRY(checkpoint::WrittenFiles weights,
             checkpoint::write_sharded_safetensors(directory, sources,
                                                   {.max_shard_bytes = options.max_shard_bytes,
                                                    .base_name = "model",
                                                    .metadata = {{"format", "pt"}},
                                                    .progress = options.progress}));
    OMNI_RETURN_IF_ERROR(
        checkpoint::write_json_file(directory / "tokenizer.json", tokenizer.tokenizer));
    OMNI_RETURN_IF_ERROR(checkpoint::write_json_file(directory / "tokenizer_config.json",
                                                     tokenizer.tokenizer_config));
    OMNI_RETURN_IF_ERROR(checkpoint::write_json_file(directory / "preprocessor_config.json",
                                                     omni_preprocessor_config()));
    const OmniTokenIds ids;
    const ordered_json generation = {
        {"bos_token_id", qwen3::kQwenFirstSpecialId},
        {"eos_token_id", {ids.im_end, qwen3::kQwenFirstSpecialId}},
        {"pad_token_id", qwen3::kQwenFirstSpecialId},
        {"transformers_version", "4.57.0.dev0"},
    };
    OMNI_RETURN_IF_ERROR(
        checkpoint::write_json_file(directory / "generation_config.json", generation));
    // config.json last: a directory with a config is a complete checkpoint.
    OMNI_RETURN_IF_ERROR(checkpoint::write_json_file(directory / checkpoint::kConfigFile, json));
    return MadeCheckpoint{.config = std::move(config), .weights = std::move(weights)};
}

}  // namespace omnirt::models::qwen3_omni

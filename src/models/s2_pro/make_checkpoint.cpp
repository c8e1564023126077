#include "models/s2_pro/make_checkpoint.h"

#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/dummy.h"
#include "checkpoint/generated.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "models/s2_pro/codec_weights.h"
#include "models/s2_pro/weights.h"

namespace omnirt::models::s2_pro {
namespace {

using ordered_json = nlohmann::ordered_json;

// Qwen3's own added tokens end here; S2-Pro's start at the next id.
constexpr std::int64_t kLastQwen3Token = 151668;

ordered_json added_token(std::int64_t id, const std::string& content, bool special) {
    return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
            {"rstrip", false}, {"normalized", false}, {"special", special}};
}

S2ProTokenizerFiles build_tokenizer_files() {
    const qwen3::TinyTokenizerFiles& tiny = qwen3::tiny_tokenizer_files();
    S2ProTokenizerFiles files{.tokenizer = tiny.tokenizer,
                              .tokenizer_config = tiny.tokenizer_config};
    std::vector<std::pair<std::int64_t, std::pair<std::string, bool>>> tokens;
    for (const qwen3::QwenSpecialToken& token : qwen3::qwen_special_tokens()) {
        if (token.qwen_id > kLastQwen3Token) break;
        tokens.push_back({token.qwen_id, {std::string(token.content), token.special}});
    }
    const S2ProTokenIds ids;
    const std::pair<std::int64_t, const char*> fish[] = {
        {ids.pad, "<|pad|>"},
        {ids.phoneme_start, "<|phoneme_start|>"},
        {ids.phoneme_end, "<|phoneme_end|>"},
        {ids.text, "<|text|>"},
        {ids.voice, "<|voice|>"},
        {ids.interleave, "<|interleave|>"},
        {ids.audio_start, "<|audio_start|>"},
        {ids.audio_end, "<|audio_end|>"},
        {ids.audio_pad, "<|audio_pad|>"},
    };
    for (const auto& [id, content] : fish) tokens.push_back({id, {content, true}});
    for (std::int64_t i = 0; i <= ids.semantic_end - ids.semantic_begin; ++i) {
        tokens.push_back(
            {ids.semantic_begin + i, {"<|semantic:" + std::to_string(i) + "|>", true}});
    }
    ordered_json added = ordered_json::array();
    ordered_json decoder = ordered_json::object();
    for (const auto& [id, token] : tokens) {
        added.push_back(added_token(id, token.first, token.second));
        decoder[std::to_string(id)] = {{"content", token.first}, {"lstrip", false},
                                       {"normalized", false},    {"rstrip", false},
                                       {"single_word", false},   {"special", token.second}};
    }
    files.tokenizer["added_tokens"] = std::move(added);
    files.tokenizer_config["added_tokens_decoder"] = std::move(decoder);
    files.tokenizer_config["additional_special_tokens"] = ordered_json::array();
    files.tokenizer_config["pad_token"] = "<|pad|>";
    files.tokenizer_config["eos_token"] = "<|im_end|>";
    files.tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast";
    files.tokenizer_config.erase("chat_template");
    return files;
}

}  // namespace

const S2ProTokenizerFiles& s2_pro_tokenizer_files() {
    static const S2ProTokenizerFiles files = build_tokenizer_files();
    return files;
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
    OMNI_TRY(ordered_json json,
             s2_pro_preset(options.preset, checkpoint::torch_dtype_name(options.dtype)));
    OMNI_TRY(S2ProConfig config, parse_s2_pro_config(nlohmann::json(json)));
    const std::vector<checkpoint::TensorSpec> specs = s2_pro_tensor_specs(config, options.dtype);
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
    // The codec in float32 (SGLang keeps it so), under codec.pth's keys.
    OMNI_TRY(CodecSizes codec,
             codec_preset(options.preset == "s2-pro" ? "release" : options.preset));
    std::vector<checkpoint::TensorSource> codec_sources;
    for (const checkpoint::TensorSpec& spec : codec_tensor_specs(codec, DType::f32)) {
        codec_sources.push_back(checkpoint::dummy_source(spec, init));
    }
    OMNI_RETURN_IF_ERROR(checkpoint::write_safetensors(directory / kCodecFile, codec_sources,
                                                       {.metadata = {{"format", "pt"}}}));
    const S2ProTokenizerFiles& tokenizer = s2_pro_tokenizer_files();
    OMNI_RETURN_IF_ERROR(
        checkpoint::write_json_file(directory / "tokenizer.json", tokenizer.tokenizer));
    OMNI_RETURN_IF_ERROR(checkpoint::write_json_file(directory / "tokenizer_config.json",
                                                     tokenizer.tokenizer_config));
    // config.json last: a directory with a config is a complete checkpoint.
    OMNI_RETURN_IF_ERROR(checkpoint::write_json_file(directory / checkpoint::kConfigFile, json));
    return MadeCheckpoint{.config = std::move(config), .weights = std::move(weights)};
}

}  // namespace omnirt::models::s2_pro

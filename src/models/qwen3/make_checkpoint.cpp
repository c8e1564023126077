#include "models/qwen3/make_checkpoint.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/dummy.h"
#include "checkpoint/generated.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "models/qwen3/weights.h"

namespace omnirt::models::qwen3 {

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
    OMNI_TRY(Qwen3Config config, qwen3_preset(options.preset, options.moe));
    const TinyTokenizerIds ids = tiny_tokenizer_ids();
    config.torch_dtype = checkpoint::torch_dtype_name(options.dtype);
    config.bos_token_id = ids.endoftext;
    config.eos_token_ids = {ids.im_end};
    OMNI_RETURN_IF_ERROR(validate(config));
    OMNI_CHECK(config.vocab_size >= kTinyTokenizerSize, "preset vocabulary smaller than tokenizer");
    OMNI_RETURN_IF_ERROR(checkpoint::prepare_checkpoint_directory(directory, options.overwrite));

    std::vector<checkpoint::TensorSource> sources;
    const checkpoint::DummyInit init{.seed = options.seed, .std = options.init_std};
    for (const checkpoint::TensorSpec& spec : tensor_specs(config, options.dtype)) {
        sources.push_back(checkpoint::dummy_source(spec, init));
    }
    OMNI_TRY(checkpoint::WrittenFiles weights,
             checkpoint::write_sharded_safetensors(directory, sources,
                                                   {.max_shard_bytes = options.max_shard_bytes,
                                                    .base_name = "model",
                                                    .metadata = {{"format", "pt"}},
                                                    .progress = options.progress}));

    const TinyTokenizerFiles& tokenizer = tiny_tokenizer_files();
    OMNI_RETURN_IF_ERROR(
        checkpoint::write_json_file(directory / "tokenizer.json", tokenizer.tokenizer));
    OMNI_RETURN_IF_ERROR(checkpoint::write_json_file(directory / "tokenizer_config.json",
                                                     tokenizer.tokenizer_config));
    const nlohmann::ordered_json generation = {
        {"bos_token_id", ids.endoftext},
        {"do_sample", true},
        {"eos_token_id", {ids.im_end, ids.endoftext}},
        {"pad_token_id", ids.endoftext},
        {"temperature", 0.6},
        {"top_k", 20},
        {"top_p", 0.95},
        {"transformers_version", "4.51.0"},
    };
    OMNI_RETURN_IF_ERROR(
        checkpoint::write_json_file(directory / "generation_config.json", generation));
    // config.json last: a directory with a config is a complete checkpoint.
    OMNI_RETURN_IF_ERROR(checkpoint::write_text_file(directory / checkpoint::kConfigFile,
                                                     to_json(config).dump(2) + "\n"));
    return MadeCheckpoint{.config = std::move(config), .weights = std::move(weights)};
}

}  // namespace omnirt::models::qwen3

#include "models/qwen3/make_checkpoint.h"

#include <fstream>
#include <regex>

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/dummy.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "models/qwen3/weights.h"

namespace omnirt::models::qwen3 {
namespace {

Status write_text(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::path temporary = path;
    temporary += ".partial";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out << text;
        out.flush();
        if (!out) {
            std::error_code ignored;
            std::filesystem::remove(temporary, ignored);
            return fail(ErrorCode::unavailable, path.string() + ": cannot write");
        }
    }
    std::error_code error;
    std::filesystem::rename(temporary, path, error);
    if (error) return fail(ErrorCode::unavailable, path.string() + ": " + error.message());
    return ok_status();
}

Status write_json(const std::filesystem::path& path, const nlohmann::ordered_json& value) {
    return write_text(path, value.dump(2) + "\n");
}

const char* torch_dtype_name(DType dtype) {
    switch (dtype) {
        case DType::f16:
            return "float16";
        case DType::f32:
            return "float32";
        default:
            return "bfloat16";
    }
}

// Prepares `directory`: created when missing; when not empty, refused unless `overwrite`, in
// which case weight files of an earlier layout are removed so they cannot shadow the new ones.
Status prepare_directory(const std::filesystem::path& directory, bool overwrite) {
    std::error_code error;
    if (std::filesystem::exists(directory, error)) {
        if (!std::filesystem::is_directory(directory, error)) {
            return fail(ErrorCode::already_exists,
                        directory.string() + " exists and is not a directory");
        }
        if (!std::filesystem::is_empty(directory, error)) {
            if (!overwrite) {
                return fail(
                    ErrorCode::already_exists,
                    directory.string() + " is not empty (overwrite to replace its checkpoint)");
            }
            static const std::regex kWeights(
                R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
            for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
                if (std::regex_match(entry.path().filename().string(), kWeights)) {
                    std::filesystem::remove(entry.path(), error);
                    if (error) {
                        return fail(ErrorCode::unavailable,
                                    entry.path().string() + ": cannot remove: " + error.message());
                    }
                }
            }
        }
        return ok_status();
    }
    std::filesystem::create_directories(directory, error);
    if (error) {
        return fail(ErrorCode::unavailable,
                    directory.string() + ": cannot create: " + error.message());
    }
    return ok_status();
}

}  // namespace

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
    config.torch_dtype = torch_dtype_name(options.dtype);
    config.bos_token_id = ids.endoftext;
    config.eos_token_ids = {ids.im_end};
    OMNI_RETURN_IF_ERROR(validate(config));
    OMNI_CHECK(config.vocab_size >= kTinyTokenizerSize, "preset vocabulary smaller than tokenizer");
    OMNI_RETURN_IF_ERROR(prepare_directory(directory, options.overwrite));

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
    OMNI_RETURN_IF_ERROR(write_json(directory / "tokenizer.json", tokenizer.tokenizer));
    OMNI_RETURN_IF_ERROR(
        write_json(directory / "tokenizer_config.json", tokenizer.tokenizer_config));
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
    OMNI_RETURN_IF_ERROR(write_json(directory / "generation_config.json", generation));
    // config.json last: a directory with a config is a complete checkpoint.
    OMNI_RETURN_IF_ERROR(
        write_text(directory / checkpoint::kConfigFile, to_json(config).dump(2) + "\n"));
    return MadeCheckpoint{.config = std::move(config), .weights = std::move(weights)};
}

}  // namespace omnirt::models::qwen3

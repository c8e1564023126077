#pragma once
// Generated Qwen3-Omni-MoE checkpoints: the released layout of Qwen3-Omni-30B-A3B-Instruct
// (nested config.json, sharded safetensors with their index, the real tensor names,
// preprocessor_config.json, generation_config.json, a tokenizer whose Omni special tokens sit at
// their real ids) with seeded random weights at a preset's sizes.
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/progress.h"
#include "checkpoint/safetensors_writer.h"
#include "models/qwen3_omni/omni_config.h"

namespace omnirt::models::qwen3_omni {

struct MakeCheckpointOptions {
    std::string preset = "tiny";  // omni_preset_names()
    std::uint64_t seed = 0;
    DType dtype = DType::bf16;
    double init_std = 0.02;
    // Shards as the release has them (several files plus model.safetensors.index.json) even at
    // tiny sizes, so the index path is always exercised.
    std::uint64_t max_shard_bytes = 8ull << 20;
    bool overwrite = false;
    checkpoint::ProgressCallback progress;
};

struct MadeCheckpoint {
    OmniConfig config;
    checkpoint::WrittenFiles weights;
};

// The generated tokenizer: the tiny byte-level BPE of the Qwen3 family with Qwen's added tokens
// at their real ids (151643..151675), so config.json keeps the released token ids.
struct OmniTokenizerFiles {
    nlohmann::ordered_json tokenizer;
    nlohmann::ordered_json tokenizer_config;
    OmniTokenIds role_ids;  // system / user / assistant as this tokenizer spells them
};
[[nodiscard]] OmniTokenizerFiles omni_tokenizer_files();

// The released preprocessor_config.json (Whisper features + Qwen2-VL image processor).
[[nodiscard]] nlohmann::ordered_json omni_preprocessor_config();

// Errors: unknown preset (not_found), a non-empty directory without `overwrite`
// (already_exists), a dtype that is not a float weight dtype (invalid_argument), I/O failures.
[[nodiscard]] Result<MadeCheckpoint> make_checkpoint(const std::filesystem::path& directory,
                                                     const MakeCheckpointOptions& options);

}  // namespace omnirt::models::qwen3_omni

#pragma once
// Generated Qwen3 checkpoints: the real architecture and tensor names with seeded random weights,
// plus the tiny tokenizer, in the Hugging Face layout. `omnirt make-checkpoint` is a thin shell
// around make_checkpoint().
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/progress.h"
#include "checkpoint/safetensors_writer.h"
#include "models/qwen3/config.h"

namespace omnirt::models::qwen3 {

struct MakeCheckpointOptions {
    std::string preset = "tiny";  // see qwen3_preset()
    bool moe = false;
    std::uint64_t seed = 0;
    DType dtype = DType::bf16;  // bf16, f16 or f32
    double init_std = 0.02;
    std::uint64_t max_shard_bytes = checkpoint::kDefaultMaxShardBytes;
    // Write into a directory that is not empty (replacing config, tokenizer and weights files).
    bool overwrite = false;
    checkpoint::ProgressCallback progress;  // weights writing
};

struct MadeCheckpoint {
    Qwen3Config config;
    checkpoint::WrittenFiles weights;
};

// Writes config.json, generation_config.json, tokenizer.json, tokenizer_config.json and the
// weights (model.safetensors, or shards of at most max_shard_bytes plus the index) into
// `directory`, created when missing. Weights are generated and written one tensor at a time, in
// chunks: memory stays bounded at any size. The config's token ids are the tiny tokenizer's.
// Errors: unknown preset (not_found), a non-empty directory without `overwrite`
// (already_exists), I/O failures.
[[nodiscard]] Result<MadeCheckpoint> make_checkpoint(const std::filesystem::path& directory,
                                                     const MakeCheckpointOptions& options);

}  // namespace omnirt::models::qwen3

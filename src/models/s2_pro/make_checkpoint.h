#pragma once
// Generated S2-Pro checkpoints: the layout of fishaudio/s2-pro (nested config.json, sharded
// safetensors with their index and the real tensor names, tokenizer.json /
// tokenizer_config.json whose special tokens sit at their real ids) with seeded random weights at
// a preset's sizes, and the codec as codec.safetensors under codec.pth's keys (float32;
// codec_weights.h: the release's sizes for "s2-pro", smaller ones for tiny / small).
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/progress.h"
#include "checkpoint/safetensors_writer.h"
#include "models/s2_pro/config.h"

namespace omnirt::models::s2_pro {

struct MakeCheckpointOptions {
    std::string preset = "tiny";  // s2_pro_preset_names()
    std::uint64_t seed = 0;
    DType dtype = DType::bf16;
    double init_std = 0.02;
    // Shards as the release has them (several files plus model.safetensors.index.json).
    std::uint64_t max_shard_bytes = 8ull << 20;
    bool overwrite = false;
    checkpoint::ProgressCallback progress;
};

struct MadeCheckpoint {
    S2ProConfig config;
    checkpoint::WrittenFiles weights;
};

// The generated tokenizer: the tiny byte-level BPE of the Qwen3 family (ids below 1024), Qwen3's
// added tokens 151643..151668 at their real ids, then S2-Pro's: <|pad|> 151669,
// <|phoneme_start|> / <|phoneme_end|>, <|text|> / <|voice|> / <|interleave|>,
// <|audio_start|> / <|audio_end|> / <|audio_pad|> (151670..151677) and <|semantic:i|> at
// 151678 + i, i < 4096. All of S2-Pro's added tokens are special.
struct S2ProTokenizerFiles {
    nlohmann::ordered_json tokenizer;
    nlohmann::ordered_json tokenizer_config;
};
[[nodiscard]] const S2ProTokenizerFiles& s2_pro_tokenizer_files();

// Errors: unknown preset (not_found), a non-empty directory without `overwrite`
// (already_exists), a dtype that is not a float weight dtype (invalid_argument), I/O failures.
[[nodiscard]] Result<MadeCheckpoint> make_checkpoint(const std::filesystem::path& directory,
                                                     const MakeCheckpointOptions& options);

}  // namespace omnirt::models::s2_pro

#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt make-checkpoint --arch qwen3 --preset tiny|0.6b [--moe] [--seed N] [--dtype bf16|f16|f32]
// [--init-std X] [--max-shard-size SIZE] [--force] --out DIR`: writes a Hugging Face checkpoint
// with the real architecture, seeded random weights and the tiny tokenizer (see
// docs/checkpoints.md).
void add_make_checkpoint_command(CLI::App& app, int& exit_code);

}  // namespace omnirt::cli

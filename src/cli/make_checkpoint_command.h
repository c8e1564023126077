#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt make-checkpoint [--arch FAMILY] --preset P [--moe] [--seed N] [--dtype bf16|f16|f32]
// [--init-std X] [--max-shard-size SIZE] [--force] --out DIR`: writes a Hugging Face checkpoint
// of a model family (models/builtin_families.h; --arch defaults to the default family) with the
// real architecture, seeded random weights and the family's tokenizer (see
// docs/checkpoints.md). An unknown arch or preset exits 2 naming the known ones.
void add_make_checkpoint_command(CLI::App& app, int& exit_code);

}  // namespace omnirt::cli

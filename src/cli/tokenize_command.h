#pragma once
#include <CLI/CLI.hpp>

namespace omnirt::cli {

// `omnirt tokenize --model-path DIR [--no-special] TEXT` prints the token ids of TEXT as a JSON
// list; `omnirt tokenize --model-path DIR --decode ID...` prints the text of ids (JSON string).
// The tokenizer is DIR/tokenizer.json (docs/text.md).
void add_tokenize_command(CLI::App& app, int& exit_code);

}  // namespace omnirt::cli

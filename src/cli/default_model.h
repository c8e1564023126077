#pragma once
// What `omnirt serve` runs without --config: the chat pipeline of a model family
// (ServeDefaults, models/family.h) on the family's generated checkpoint or on --model-path,
// with the family's libtorch stages from its plugin.
#include <string>

#include "core/error.h"
#include "models/family.h"

namespace omnirt::cli {

// The directory of the family's generated default checkpoint, written on first use (seeded, so
// every machine gets the same weights): $OMNIRT_CACHE_DIR, else $XDG_CACHE_HOME/omnirt, else
// ~/.cache/omnirt, then serve.default_checkpoint_name. Safe when several processes start at
// once (each writes a private directory and renames it into place).
[[nodiscard]] Result<std::string> default_checkpoint(const models::ModelFamily& family);

// The family's plugin: $<serve.plugin_env>, else lib/<serve.plugin_file> next to the binary's
// bin/ directory (the build tree's layout). not_found, saying how to get it, when absent.
[[nodiscard]] Result<std::string> family_plugin_path(const models::ModelFamily& family);

}  // namespace omnirt::cli

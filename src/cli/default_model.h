#pragma once
// What `omnirt serve` runs without --config: the Qwen3 chat pipeline (configs/qwen3_chat.yaml,
// embedded) on a generated tiny checkpoint, with the thinker from the Qwen3 plugin.
#include <string>

#include "core/error.h"

namespace omnirt::cli {

// The directory of the generated tiny Qwen3 checkpoint, written on first use (seeded, so every
// machine gets the same weights): $OMNIRT_CACHE_DIR, else $XDG_CACHE_HOME/omnirt, else
// ~/.cache/omnirt, then "qwen3-tiny-v1". Safe when several processes start at once (each writes
// a private directory and renames it into place).
[[nodiscard]] Result<std::string> default_tiny_checkpoint();

// The Qwen3 plugin: $OMNIRT_QWEN3_PLUGIN, else lib/libomnirt_qwen3_plugin.so next to the
// binary's bin/ directory (the build tree's layout). not_found, saying how to get it, when absent.
[[nodiscard]] Result<std::string> qwen3_plugin_path();

}  // namespace omnirt::cli

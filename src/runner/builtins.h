#pragma once
// Registers everything built into omnirt with the process-wide registries: the relay backends,
// the pipeline's test and demo stages, and the torch-free stages of every model family
// (models/builtin_families.h); stages that need libtorch come from plugins. Every process of an instance
// (the parent and each stage process) calls it before it resolves factory names.
//
// Idempotent and thread-safe: the first call registers, later calls return its result.
#include "core/error.h"

namespace omnirt::runner {

[[nodiscard]] Status register_builtins();

}  // namespace omnirt::runner

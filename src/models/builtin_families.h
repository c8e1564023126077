#pragma once
// Every model family built into omnirt: one per directory src/models/<family>/ whose
// CMakeLists.txt declares it (omnirt_model_family()); src/models/CMakeLists.txt generates the
// call to each family's register_family().
//
// Thread-safe: the registry is filled once, on the first call, and never changed after.
#include "core/error.h"
#include "models/family.h"

namespace omnirt::models {

// The registry of the built-in families, in directory order. A family whose registration fails
// (a name taken twice) aborts the process with the error: that is a build mistake.
[[nodiscard]] const FamilyRegistry& builtin_families();

// Registers the torch-free stage factories of every built-in family with the global registry.
// Idempotent.
[[nodiscard]] Status register_family_stages();

}  // namespace omnirt::models

#pragma once
// Registers everything built into omnirt with the process-wide registries: the relay backends,
// the demo stages (demo.*, `omnirt serve --demo`) and the torch-free stages of every model family
// (models/builtin_families.h); stages that need libtorch come from plugins. Every process of an
// instance (the parent and each stage process) calls it before it resolves factory names.
//
// The test stages (test.*, testing/test_stages.h) are not registered by default. They are an
// explicit opt-in: the environment variable OMNIRT_TEST_STAGES=1. Stage processes inherit the
// environment of the process that starts them, so the opt-in of `omnirt run` / `omnirt serve`
// reaches every stage process of the instance.
//
// Idempotent and thread-safe: the first call registers, later calls return its result.
#include "core/error.h"

namespace omnirt::runner {

// The opt-in for the test stages; its value must be "1".
inline constexpr const char* kTestStagesEnv = "OMNIRT_TEST_STAGES";

[[nodiscard]] Status register_builtins();

// True when this process runs with OMNIRT_TEST_STAGES=1.
[[nodiscard]] bool test_stages_enabled();

// For test binaries and benchmarks made of test stages: sets OMNIRT_TEST_STAGES=1 in this
// process's environment (so that the stage processes it starts register the test stages too)
// and registers them here. Idempotent: only a call that finds the variable unset or different
// calls setenv, which races with getenv on other threads, so make the first call before the
// process starts threads.
[[nodiscard]] Status enable_test_stages();

}  // namespace omnirt::runner

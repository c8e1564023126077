#pragma once
// `test.sink`: a terminal stage for benchmarks. It drops every tensor of its input and answers
// with data = {"tensor_bytes": total bytes of the input's tensors}, so a large payload is not
// sent back to the coordinator inline.
#include "core/error.h"
#include "core/registry.h"

namespace omnirt::pipeline {

// Idempotent.
[[nodiscard]] Status register_sink_stage(Registry& registry = Registry::global());

}  // namespace omnirt::pipeline
